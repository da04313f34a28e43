// nonzero and masked_select on the GPU against the CPU: exact coordinates and values in every
// dtype, large inputs (many blocks), non-contiguous ones, and masked_select's gradient.
#include "cuda_test_util.h"
#include "ember/core/ops/nonzero.h"

namespace ember::testing {
namespace {

class NonzeroCuda : public CudaTest {};

TEST_F(NonzeroCuda, MatchesTheCpu) {
  manual_seed(5);
  for (DimVector shape : {DimVector{1000003}, DimVector{3, 5, 7, 11}, DimVector{}, DimVector{0, 4}})
    for (ScalarType dt : {kFloat32, kBFloat16, kInt64, kBool}) {
      SCOPED_TRACE(::testing::Message() << IntArrayRef(shape) << " " << dt);
      Tensor x = (randint(-2, 3, shape) * (rand(shape) > 0.7)).to(dt);
      EXPECT_TRUE(nonzero(x.cuda()).cpu().equal(nonzero(x)));
      if (x.dim() == 4)
        EXPECT_TRUE(nonzero(x.cuda().transpose(1, 3)).cpu().equal(nonzero(x.transpose(1, 3))));
    }
}

TEST_F(NonzeroCuda, MaskedSelectMatchesTheCpuWithItsGradient) {
  manual_seed(6);
  Tensor x = randn({64, 33}), mask = rand({33}) > 0.5;
  Tensor y = masked_select(x, mask);
  Tensor xd = x.cuda().requires_grad_();
  Tensor yd = masked_select(xd, mask.cuda());
  EXPECT_TRUE(yd.cpu().equal(y));
  Tensor gy = randn(y.sizes());
  Tensor gx = autograd::grad({yd}, {xd}, {gy.cuda()})[0].cpu();
  Tensor xc = x.clone().requires_grad_();
  EXPECT_CLOSE(gx, autograd::grad({masked_select(xc, mask)}, {xc}, {gy})[0], Tolerance{0, 0});
}

}  // namespace
}  // namespace ember::testing
