// _foreach_copy_ on the GPU beyond the op table: lists that need several launches (more than 48
// tensors, a tensor of more than 320 chunks), the scalar path (tensors one element into their
// buffer), every element width, and the pairs that go through copy_ (across devices, across
// dtypes, strided) mixed into one call with the kernel's pairs.
#include "cuda_test_util.h"
#include "ember/core/ops/foreach.h"

namespace ember::testing {
namespace {

class ForeachCopyCuda : public CudaTest {};

const Device kGpu(kCUDA, 0);

// `t` on the GPU; with `misalign`, one element into a larger buffer.
Tensor on_gpu(const Tensor& t, bool misalign) {
  if (!misalign) return t.to(kGpu, /*non_blocking=*/false, /*copy=*/true);
  Tensor buf = zeros({t.numel() + 1}, TensorOptions(t.dtype()).device(kGpu));
  Tensor view = buf.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

TEST_F(ForeachCopyCuda, ManyTensorsEveryWidth) {
  for (ScalarType dt : {kBool, kFloat16, kBFloat16, kFloat32, kInt32, kFloat64, kInt64}) {
    for (bool misalign : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (misalign ? " misaligned" : ""));
      manual_seed(3);
      std::vector<Tensor> src, self;
      for (int64_t i = 0; i < 100; ++i) src.push_back(random_tensor({(i * 373) % 5000}, dt));
      src.push_back(random_tensor({}, dt));
      src.push_back(random_tensor({320 * 65536 + 12345}, dt));
      src.push_back(random_tensor({65537}, dt));
      std::vector<Tensor> gpu_src;
      for (const Tensor& t : src) {
        gpu_src.push_back(on_gpu(t, misalign));
        self.push_back(on_gpu(zeros(t.sizes(), dt), misalign));
      }
      _foreach_copy_(self, gpu_src);
      for (size_t i = 0; i < src.size(); ++i) EXPECT_CLOSE(self[i].cpu(), src[i], Tolerance{0, 0}) << i;
    }
  }
}

TEST_F(ForeachCopyCuda, MixedPairsInOneCall) {
  manual_seed(4);
  Tensor a = random_tensor({5, 7}, kFloat32), b = random_tensor({300}, kFloat32),
         c = random_tensor({4, 6}, kFloat64), d = random_tensor({9}, kFloat32),
         e = random_tensor({8}, kBFloat16);
  const TensorOptions gpu32 = TensorOptions(kFloat32).device(kGpu);
  std::vector<Tensor> self = {zeros({5, 7}, gpu32),  // from the host
                              zeros({300}, gpu32),   // the kernel
                              zeros({4, 6}, gpu32),  // float64 -> float32
                              zeros({9}),            // to the host
                              zeros({8, 2}, TensorOptions(kBFloat16).device(kGpu)).select(1, 0),  // strided
                              zeros({8}, TensorOptions(kBFloat16).device(kGpu))};  // the kernel
  std::vector<Tensor> src = {a, b.to(kGpu), c.to(kGpu), d.to(kGpu), e.to(kGpu), e.to(kGpu)};
  _foreach_copy_(self, src);
  EXPECT_CLOSE(self[0].cpu(), a, Tolerance{0, 0});
  EXPECT_CLOSE(self[1].cpu(), b, Tolerance{0, 0});
  EXPECT_CLOSE(self[2].cpu(), c.to(kFloat32), Tolerance{0, 0});
  EXPECT_CLOSE(self[3], d, Tolerance{0, 0});
  EXPECT_CLOSE(self[4].cpu(), e, Tolerance{0, 0});
  EXPECT_CLOSE(self[5].cpu(), e, Tolerance{0, 0});
}

}  // namespace
}  // namespace ember::testing
