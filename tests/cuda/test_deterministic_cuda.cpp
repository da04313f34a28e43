// use_deterministic_algorithms on CUDA: the adds of index_add, scatter_add, index_put(accumulate)
// and embedding's backward run in index order and give the CPU kernel's sums bit for bit; cuDNN's
// convolution gradients and fused attention backward give the same bits twice.
#include <ember/core/deterministic.h>
#include <ember/cuda/attention_cudnn.h>
#include <ember/cuda/conv_cudnn.h>
#include <ember/ember.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

const Device kGpu(kCUDA, 0);
constexpr ScalarType kFloatTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

class DeterministicCuda : public CudaTest {
 protected:
  void TearDown() override { cuda::cudnn::set_deterministic(false); }
  DeterministicMode mode_{true};
};

// Each op with many repeated indices, on the GPU against the same op on the CPU.
TEST_F(DeterministicCuda, AddsByIndexMatchTheCpuBitForBit) {
  manual_seed(11);
  const Tensor rows = randint(0, 10, {600}), cols = randint(0, 7, {6, 300});
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    const Tensor src = randn({600, 33}).to(dt), line_src = randn({6, 300}).to(dt);
    auto both = [&](const char* what, const std::function<Tensor(Device)>& op) {
      SCOPED_TRACE(what);
      const Tensor want = op(kCPU), got = op(kGpu).cpu();
      EXPECT_TRUE(got.equal(want)) << "largest difference "
                                   << (got.to(kFloat64) - want.to(kFloat64)).abs().max().item<double>();
    };
    both("index_add", [&](Device d) {
      return index_add(zeros({10, 33}, dt).to(d), 0, rows.to(d), src.to(d));
    });
    both("scatter_add", [&](Device d) {
      return scatter_add(zeros({6, 7}, dt).to(d), 1, cols.to(d), line_src.to(d));
    });
    both("index_put_ accumulate", [&](Device d) {
      Tensor x = zeros({10, 33}, dt).to(d);
      x.index_put_({rows.to(d)}, src.to(d), /*accumulate=*/true);
      return x;
    });
    both("embedding backward", [&](Device d) {
      Tensor w = zeros({10, 33}, dt).to(d).requires_grad_();
      embedding(w, rows.view({20, 30}).to(d)).backward(src.view({20, 30, 33}).to(d));
      return w.grad();
    });
  }
}

// A convolution's gradients, twice: cuDNN keeps to its deterministic engines (through the mode,
// or through cudnn::set_deterministic alone).
TEST_F(DeterministicCuda, ConvolutionGradientsRepeat) {
  manual_seed(12);
  const Tensor x0 = randn({16, 32, 28, 28}), w0 = randn({64, 32, 3, 3}) * 0.1, g0 = randn({16, 64, 28, 28});
  for (bool through_mode : {true, false}) {
    DeterministicMode mode(through_mode);
    cuda::cudnn::set_deterministic(!through_mode);
    EXPECT_EQ(cuda::cudnn::deterministic(), !through_mode);
    for (ScalarType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (through_mode ? ", the mode" : ", cudnn::set_deterministic"));
      auto grads = [&] {
        Tensor x = x0.to(dt).to(kGpu).requires_grad_(), w = w0.to(dt).to(kGpu).requires_grad_();
        conv2d(x, w, {}, 1, 1).backward(g0.to(dt).to(kGpu));
        return std::pair{x.grad(), w.grad()};
      };
      const auto [gx1, gw1] = grads();
      const auto [gx2, gw2] = grads();
      EXPECT_TRUE(gx1.equal(gx2));
      EXPECT_TRUE(gw1.equal(gw2));
    }
  }
}

// cuDNN's fused attention backward with its ordered query gradient: the same bits twice.
TEST_F(DeterministicCuda, FusedAttentionBackwardRepeats) {
  if (!cuda::cudnn_sdp_available()) GTEST_SKIP() << "built without cudnn_frontend";
  manual_seed(13);
  const Tensor q0 = randn({4, 8, 256, 64}), k0 = randn({4, 8, 256, 64}), v0 = randn({4, 8, 256, 64}),
               g0 = randn({4, 8, 256, 64});
  auto grads = [&] {
    Tensor q = q0.to(kBFloat16).to(kGpu).requires_grad_(), k = k0.to(kBFloat16).to(kGpu).requires_grad_(),
           v = v0.to(kBFloat16).to(kGpu).requires_grad_();
    Tensor out = scaled_dot_product_attention(q, k, v, {}, 0, /*is_causal=*/true);
    EXPECT_TRUE(out.grad_fn() && out.grad_fn()->name() == "_scaled_dot_product_cudnn_attention")
        << "cuDNN declined: " << cuda::cudnn_sdp_last_rejection();
    out.backward(g0.to(kBFloat16).to(kGpu));
    return std::vector<Tensor>{q.grad(), k.grad(), v.grad()};
  };
  const std::vector<Tensor> first = grads();
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> again = grads();
    for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(again[i].equal(first[i])) << "gradient " << i;
  }
}

}  // namespace
}  // namespace ember::testing
