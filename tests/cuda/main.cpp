// CUDA suite main: every op-table entry runs on the GPU against the same op on the CPU
// (OpTableCuda.<op>), and every gradcheck case compares its CUDA gradients with the CPU ones
// (GradCuda.<op>). Without a GPU each test reports itself skipped.
#include <ember/cuda/conv_cudnn.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.to(d));
  return out;
}

void run_entry_cuda(const OpEntry& e) {
  for (ScalarType dt : e.dtypes) {
    manual_seed(1234);
    for (const Sample& s : e.samples(dt)) {
      SCOPED_TRACE(e.name + " " + std::string(to_string(dt)) + " inputs " + s.desc);
      try {
        manual_seed(99);
        Tensor ref = e.fn(s.inputs);
        manual_seed(99);
        Tensor out = e.fn(to_device(s.inputs, kCUDA));
        EXPECT_TRUE(out.is_cuda()) << "the op should return a CUDA tensor";
        Tolerance tol = cuda_tolerance(out.dtype());
        tol.rtol *= e.tol_scale;
        tol.atol *= e.tol_scale;
        EXPECT_TRUE(assert_close(out.cpu(), ref, tol));
      } catch (const Error& err) {
        ADD_FAILURE() << err.what();
      }
    }
  }
}

// Gradients of sum(fn(x) * w) for a fixed random w, on both devices, in float64.
std::vector<Tensor> grads_on(const GradcheckCase& c, const std::vector<Tensor>& host_inputs, Device d) {
  std::vector<Tensor> in;
  for (const Tensor& t : host_inputs) in.push_back(t.to(d).detach().requires_grad_());
  Tensor out = c.fn(in);
  manual_seed(5);
  Tensor w = random_tensor(out.sizes(), out.dtype()).to(d);
  (out * w).sum().backward();
  std::vector<Tensor> g;
  for (const Tensor& t : in) g.push_back(t.grad().defined() ? t.grad().cpu() : Tensor());
  return g;
}

void run_grad_cuda(const GradcheckCase& c) {
  manual_seed(7);
  std::vector<Tensor> in;
  for (const DimVector& s : c.shapes) in.push_back(random_tensor(s, kFloat64, c.low, c.high));
  try {
    manual_seed(99);
    std::vector<Tensor> ref = grads_on(c, in, kCPU);
    manual_seed(99);
    std::vector<Tensor> got = grads_on(c, in, kCUDA);
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE("gradient of input " + std::to_string(i));
      ASSERT_EQ(ref[i].defined(), got[i].defined());
      if (ref[i].defined()) {
        EXPECT_TRUE(assert_close(got[i], ref[i], cuda_tolerance(kFloat64)));
      }
    }
  } catch (const Error& err) {
    ADD_FAILURE() << err.what();
  }
}

}  // namespace
}  // namespace ember::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The suite compares float32 convolutions with the CPU's at float32 tolerances.
  ember::cuda::cudnn::set_allow_tf32(false);
  using namespace ember::testing;
  register_table_tests<CudaTest>("OpTableCuda", run_entry_cuda, "GradCuda", run_grad_cuda);
  return RUN_ALL_TESTS();
}
