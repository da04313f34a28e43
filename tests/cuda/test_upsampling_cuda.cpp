// F.interpolate on the GPU against the CPU: nearest and bilinear (both align_corners), values and
// input gradients, float32 and bf16.
#include "cuda_test_util.h"
#include "ember/nn/upsampling.h"

namespace ember::testing {
namespace {

class InterpolateCuda : public CudaTest {};

TEST_F(InterpolateCuda, MatchesTheCpu) {
  manual_seed(8);
  using nn::InterpolateOptions;
  for (const InterpolateOptions& o :
       {InterpolateOptions().size({13, 6}).mode("bilinear"),
        InterpolateOptions().scale_factor({2}).mode("bilinear").align_corners(true),
        InterpolateOptions().scale_factor({1.5, 0.5})})
    for (ScalarType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(o.mode() + " " + std::string(to_string(dt)));
      const Tensor x = randn({2, 3, 7, 9}).to(dt), g = randn({2, 3, 14, 18});  // covers every output size
      auto run = [&](Device d) {
        Tensor xr = x.to(d).detach().requires_grad_();
        Tensor y = nn::functional::interpolate(xr, o);
        y.backward(g.narrow(2, 0, y.size(2)).narrow(3, 0, y.size(3)).to(d).to(dt));
        return std::pair{y.cpu(), xr.grad().cpu()};
      };
      auto [y_cpu, gx_cpu] = run(Device(kCPU));
      auto [y_gpu, gx_gpu] = run(Device(kCUDA));
      EXPECT_CLOSE(y_gpu, y_cpu, cuda_tolerance(dt));
      // The gradient sums up to 4 x 3 terms per input element, in another order than the CPU's.
      const Tolerance t = cuda_tolerance(dt);
      EXPECT_CLOSE(gx_gpu, gx_cpu, Tolerance{t.rtol * 4, t.atol * 4});
    }
}

}  // namespace
}  // namespace ember::testing
