// NVTX on the GPU: with emit_nvtx on, forward and backward kernels run inside ranges and give the
// same results as with it off; explicit ranges nest and balance around GPU work.
#include <ember/cuda/nvtx.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class NvtxCuda : public CudaTest {};

TEST_F(NvtxCuda, EmitNvtxLeavesResultsUnchanged) {
  manual_seed(5);
  Tensor x = random_tensor({2, 3, 8, 8}, kFloat32).cuda(), w = random_tensor({4, 3, 3, 3}, kFloat32).cuda();
  auto step = [&] {
    Tensor xr = x.detach().requires_grad_();
    Tensor y = relu(conv2d(xr, w, {}, 1, 1)).sum();
    return std::vector<Tensor>{y.cpu(), autograd::grad({y}, {xr})[0].cpu()};
  };
  std::vector<Tensor> off = step(), on;
  {
    cuda::nvtx::EmitNvtx emit;
    cuda::NvtxRange outer("step");
    cuda::nvtx::range_push("inner");
    on = step();
    cuda::nvtx::range_pop();
    cuda::nvtx::mark("done");
  }
  EXPECT_FALSE(cuda::nvtx::emit_nvtx_enabled());
  cuda::synchronize();
  // The same algorithms run; cuDNN may still sum the input gradient in another order.
  for (size_t i = 0; i < off.size(); ++i) EXPECT_CLOSE(on[i], off[i], cuda_tolerance(kFloat32));
}

}  // namespace
}  // namespace ember::testing
