// F.interpolate and nn.Upsample (nn/upsampling.h): PyTorch's values for nearest, linear and
// bilinear (both align_corners), float64 gradients, reduced precision rounding once, the module,
// and errors.
#include "ember/nn/upsampling.h"

#include "test_util.h"

namespace ember::testing {
namespace {

namespace F = nn::functional;
using nn::InterpolateOptions;

const Tensor kSquare = tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 1, 2, 2});

TEST(Interpolate, NearestRepeatsAndPicksAsPyTorch) {
  Tensor up = F::interpolate(kSquare, InterpolateOptions().scale_factor({2}));
  EXPECT_CLOSE(up.view({4, 4}),
               tensor({{1.0f, 1.0f, 2.0f, 2.0f},
                       {1.0f, 1.0f, 2.0f, 2.0f},
                       {3.0f, 3.0f, 4.0f, 4.0f},
                       {3.0f, 3.0f, 4.0f, 4.0f}}),
               Tolerance{0, 0});
  // 2 -> 3 picks floor(d * 2 / 3): 0, 0, 1 (torch: [[1, 1, 2]]).
  Tensor row = F::interpolate(tensor({1.0f, 2.0f}).view({1, 1, 2}), InterpolateOptions().size({3}));
  EXPECT_CLOSE(row.view({3}), tensor({1.0f, 1.0f, 2.0f}), Tolerance{0, 0});
  // 5D, one factor per dim.
  EXPECT_TRUE(F::interpolate(ones({1, 2, 2, 3, 4}), InterpolateOptions().scale_factor({1, 2, 0.5}))
                  .sizes()
                  .equals({1, 2, 2, 6, 2}));
}

TEST(Interpolate, LinearModesGivePyTorchsValues) {
  // torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
  Tensor half = F::interpolate(kSquare, InterpolateOptions().scale_factor({2}).mode("bilinear"));
  EXPECT_CLOSE(half.view({4, 4}),
               tensor({{1.0f, 1.25f, 1.75f, 2.0f},
                       {1.5f, 1.75f, 2.25f, 2.5f},
                       {2.5f, 2.75f, 3.25f, 3.5f},
                       {3.0f, 3.25f, 3.75f, 4.0f}}),
               Tolerance{1e-6, 1e-6});
  // size=3, align_corners=True
  Tensor corners =
      F::interpolate(kSquare, InterpolateOptions().size({3}).mode("bilinear").align_corners(true));
  EXPECT_CLOSE(corners.view({3, 3}), tensor({{1.0f, 1.5f, 2.0f}, {2.0f, 2.5f, 3.0f}, {3.0f, 3.5f, 4.0f}}),
               Tolerance{1e-6, 1e-6});
  // mode="linear", size=5: sources clamp at both ends.
  Tensor line = F::interpolate(tensor({1.0f, 2.0f, 3.0f}).view({1, 1, 3}),
                               InterpolateOptions().size({5}).mode("linear"));
  EXPECT_CLOSE(line.view({5}), tensor({1.0f, 1.4f, 2.0f, 2.6f, 3.0f}), Tolerance{1e-6, 1e-6});
}

TEST(Interpolate, GradientsInFloat64) {
  for (const InterpolateOptions& o :
       {InterpolateOptions().size({5, 3}).mode("bilinear"),
        InterpolateOptions().scale_factor({1.5}).mode("bilinear").align_corners(true),
        InterpolateOptions().size({7, 2}), InterpolateOptions().scale_factor({2, 0.5})}) {
    Tensor x = random_tensor({2, 3, 4, 4}, kFloat64).requires_grad_();
    EXPECT_TRUE(
        autograd::gradcheck([&](const std::vector<Tensor>& in) { return F::interpolate(in[0], o); }, {x}))
        << o.mode();
  }
}

TEST(Interpolate, ReducedPrecisionRoundsOnce) {
  manual_seed(1);
  Tensor x = randn({2, 3, 5, 7});
  const auto o = InterpolateOptions().size({9, 4}).mode("bilinear");
  EXPECT_CLOSE(F::interpolate(x.to(kBFloat16), o),
               F::interpolate(x.to(kBFloat16).to(kFloat32), o).to(kBFloat16), Tolerance{0, 0});
}

TEST(Interpolate, UpsampleModuleAndErrors) {
  nn::Upsample up(nn::UpsampleOptions().scale_factor({2}).mode("bilinear").align_corners(false));
  EXPECT_CLOSE(up(kSquare), F::interpolate(kSquare, up->options), Tolerance{0, 0});
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions()), "interpolate: give exactly one of size");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().size({2}).scale_factor({2})),
                     "exactly one");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().size({2}).mode("bicubic")),
                     "mode 'bicubic' is not supported");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().size({2}).mode("linear")),
                     "mode 'linear' expects a 3D input");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().size({2}).align_corners(true)),
                     "align_corners only applies");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().size({2, 3, 4})),
                     "size has 3 values for 2");
  EXPECT_EMBER_ERROR(F::interpolate(kSquare, InterpolateOptions().scale_factor({0.1})), "leaves no output");
  EXPECT_EMBER_ERROR(F::interpolate(ones({4}), InterpolateOptions().size({2})),
                     "expected a 3D, 4D or 5D input");
  EXPECT_EMBER_ERROR(F::interpolate(ones({1, 1, 2}, kInt64), InterpolateOptions().size({2})),
                     "floating point");
}

}  // namespace
}  // namespace ember::testing
