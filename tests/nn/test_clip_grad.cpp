// Gradient clipping against torch.nn.utils: three parameters (the last without a gradient),
// total norms and clipped gradients from PyTorch 2.15:
//
//   import math, torch
//   from torch.nn.utils import clip_grad_norm_, clip_grad_value_
//   def params(dtype):
//       ps = []
//       for j, sh in enumerate([(2, 3), (4,), (3,)]):
//           p = torch.zeros(sh, dtype=dtype, requires_grad=True)
//           if j != 2: p.grad = torch.tensor([2 * math.cos(1.1 * i + 0.9 * j) for i in range(p.numel())],
//           dtype=dtype).reshape(sh) ps.append(p)
//       return ps
//   def show(ps, total=None):
//       vals = torch.cat([p.grad.reshape(-1) for p in ps if p.grad is not None]).tolist()
//       return ("" if total is None else repr(total.item()) + " ") + "{" + ", ".join(repr(v) for v in vals) +
//       "}"
//   for dt in (torch.float64, torch.float32):
//       for max_norm, norm_type in ((1.0, 2.0), (0.5, math.inf), (100.0, 1.0), (2.0, 3.0)):
//           ps = params(dt); t = clip_grad_norm_(ps, max_norm, norm_type)
//           print(str(dt)[6:], max_norm, norm_type, show(ps, t))
//       ps = params(dt); clip_grad_value_(ps, 0.3); print(str(dt)[6:], "value 0.3", show(ps))
#include <cmath>

#include "test_util.h"

namespace ember::testing {
namespace {

using nn::utils::clip_grad_norm_;
using nn::utils::clip_grad_value_;

std::vector<Tensor> params(ScalarType dt) {
  std::vector<Tensor> ps;
  const std::vector<DimVector> shapes = {{2, 3}, {4}, {3}};
  for (size_t j = 0; j < shapes.size(); ++j) {
    Tensor p = zeros(shapes[j], dt).requires_grad_();
    if (j != 2) {
      std::vector<double> g;
      for (int64_t i = 0; i < p.numel(); ++i)
        g.push_back(2 * std::cos(1.1 * static_cast<double>(i) + 0.9 * j));
      p.set_grad(tensor(g, kFloat64).to(dt).reshape(shapes[j]));
    }
    ps.push_back(p);
  }
  return ps;
}

Tensor grads(const std::vector<Tensor>& ps) { return cat({ps[0].grad().reshape({-1}), ps[1].grad()}); }

struct NormCase {
  ScalarType dtype;
  double max_norm, norm_type, total;
  std::vector<double> clipped;
};

TEST(ClipGrad, NormMatchesPyTorch) {
  const std::vector<NormCase> cases = {
      {kFloat64,
       1.0,
       2.0,
       4.437147510732766,
       {0.45073992794298273, 0.20445388308658116, -0.26526095118603943, -0.4450965603338749,
        -0.13852719566858282, 0.3194257629994124, 0.28018443230695905, -0.18757399511895917,
        -0.4503501056394792, -0.22098012728437438}},
      {kFloat64,
       0.5,
       INFINITY,
       2.0,
       {0.499999750000125, 0.226797947313815, -0.29425041150246717, -0.49373963808461335,
        -0.15366635815603058, 0.354334709978275, 0.3108048287329178, -0.20807331423691408,
        -0.49956732535297704, -0.24513028810520565}},
      {kFloat64,
       100.0,
       1.0,
       13.145464858582507,
       {2.0, 0.9071922428511546, -1.1770022345106916, -1.9749595398177298, -0.6146657399568387,
        1.41733954858252, 1.2432199365413288, -0.8322936730942848, -1.998270300546559, -0.9805216426813989}},
      {kFloat64,
       2.0,
       3.0,
       3.193864766471812,
       {1.2524007871560316, 0.5680841395243159, -0.7370392624927992, -1.2367204411345194, -0.3849039282798947,
        0.8875385831560613, 0.7785048135662159, -0.5211826256641335, -1.2513176486775153,
        -0.6140030385588545}},
      {kFloat32,
       1.0,
       2.0,
       4.437147617340088,
       {0.45073992013931274, 0.20445387065410614, -0.2652609348297119, -0.44509655237197876,
        -0.13852719962596893, 0.3194257616996765, 0.28018444776535034, -0.18757399916648865,
        -0.4503501057624817, -0.22098012268543243}},
      {kFloat32,
       0.5,
       INFINITY,
       2.0,
       {0.4999997615814209, 0.226797953248024, -0.29425039887428284, -0.49373963475227356,
        -0.15366636216640472, 0.3543347120285034, 0.3108048439025879, -0.20807331800460815,
        -0.49956732988357544, -0.2451302856206894}},
      {kFloat32,
       100.0,
       1.0,
       13.145463943481445,
       {2.0, 0.9071922302246094, -1.177002191543579, -1.9749594926834106, -0.6146657466888428,
        1.417339563369751, 1.2432199716567993, -0.832293689250946, -1.9982702732086182, -0.9805216193199158}},
      {kFloat32,
       2.0,
       3.0,
       3.1938648223876953,
       {1.2524007558822632, 0.5680841207504272, -0.7370392084121704, -1.236720323562622, -0.3849039375782013,
        0.8875385522842407, 0.7785047888755798, -0.5211825966835022, -1.2513176202774048,
        -0.6140030026435852}},
  };
  for (const NormCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.dtype << " max_norm " << c.max_norm << " norm_type " << c.norm_type);
    std::vector<Tensor> ps = params(c.dtype);
    Tensor total = clip_grad_norm_(ps, c.max_norm, c.norm_type);
    EXPECT_EQ(total.dim(), 0);
    EXPECT_EQ(total.dtype(), c.dtype);
    Tolerance tol = c.dtype == kFloat64 ? Tolerance{1e-15, 1e-15} : Tolerance{1e-6, 1e-7};
    EXPECT_CLOSE(total, full({}, c.total, kFloat64).to(c.dtype), tol);
    EXPECT_CLOSE(grads(ps), tensor(c.clipped, kFloat64).to(c.dtype), tol);
    EXPECT_FALSE(ps[2].grad().defined());
  }
}

TEST(ClipGrad, ValueMatchesPyTorch) {
  for (ScalarType dt : {kFloat64, kFloat32}) {
    std::vector<Tensor> ps = params(dt);
    clip_grad_value_(ps, 0.3);
    EXPECT_CLOSE(grads(ps), tensor({0.3, 0.3, -0.3, -0.3, -0.3, 0.3, 0.3, -0.3, -0.3, -0.3}, kFloat64).to(dt),
                 Tolerance{0, 0});
  }
}

TEST(ClipGrad, NoGradientsAndSingleTensors) {
  Tensor none = nn::utils::get_total_norm(std::vector<Tensor>{});
  EXPECT_EQ(none.dim(), 0);
  EXPECT_EQ(none.dtype(), kFloat32);
  EXPECT_EQ(none.item<double>(), 0);
  Tensor no_grad = zeros({3}).requires_grad_();
  EXPECT_EQ(clip_grad_norm_(no_grad, 1.0).item<double>(), 0);

  // One tensor: |(3, 4)| = 5, scaled by 1 / (5 + 1e-6).
  Tensor w = zeros({2}, kFloat64).requires_grad_();
  w.set_grad(tensor({3.0, 4.0}, kFloat64));
  EXPECT_EQ(clip_grad_norm_(w, 1.0).item<double>(), 5.0);
  EXPECT_CLOSE(w.grad(), tensor({3.0 / (5.0 + 1e-6), 4.0 / (5.0 + 1e-6)}, kFloat64), Tolerance{1e-15, 0});
  // Below max_norm the coefficient clamps to 1: the gradient is left as it was.
  w.set_grad(tensor({0.3, -0.4}, kFloat64));
  EXPECT_CLOSE(clip_grad_norm_(w, 1.0), full({}, 0.5, kFloat64), Tolerance{1e-16, 0});
  EXPECT_CLOSE(w.grad(), tensor({0.3, -0.4}, kFloat64), Tolerance{0, 0});
}

TEST(ClipGrad, NonFiniteNorms) {
  for (double bad : {NAN, INFINITY}) {
    std::vector<Tensor> ps = params(kFloat32);
    ps[1].grad().select(0, 2).fill_(bad);
    EXPECT_EMBER_ERROR(clip_grad_norm_(ps, 1.0, 2, /*error_if_nonfinite=*/true),
                       "clip_grad_norm_: the total norm of order 2", "is non-finite",
                       "error_if_nonfinite=false");
    // Without the check the gradients are scaled by the non-finite norm, as PyTorch does.
    Tensor total = clip_grad_norm_(ps, 1.0);
    EXPECT_FALSE(std::isfinite(total.item<double>()));
    EXPECT_EQ(ps[0].grad().select(0, 0).select(0, 0).item<double>() == 0, bad == INFINITY);  // 2 * 1 / inf
  }
}

TEST(ClipGrad, MixedAndReducedDtypes) {
  // bfloat16 gradients: the norm in bfloat16 (as PyTorch), the clipped gradients too.
  Tensor a = zeros({4}, kBFloat16).requires_grad_();
  a.set_grad(tensor({3.0, 0.0, 4.0, 0.0}, kBFloat16));
  Tensor total = clip_grad_norm_(a, 1.0);
  EXPECT_EQ(total.dtype(), kBFloat16);
  EXPECT_EQ(total.item<double>(), 5.0);
  EXPECT_EQ(a.grad().dtype(), kBFloat16);
  EXPECT_CLOSE(a.grad(), tensor({0.6, 0.0, 0.8, 0.0}).to(kBFloat16));
  // float32 and float64 gradients: the per-tensor norms promote to float64 for the total.
  Tensor b = zeros({2}).requires_grad_(), c = zeros({1}, kFloat64).requires_grad_();
  b.set_grad(tensor({1.0, 2.0}));
  c.set_grad(tensor({2.0}, kFloat64));
  Tensor mixed = nn::utils::get_total_norm({b.grad(), c.grad()});
  EXPECT_EQ(mixed.dtype(), kFloat64);
  EXPECT_CLOSE(mixed, full({}, 3.0, kFloat64));
  // The inf norm: the largest |g| of all.
  EXPECT_EQ(nn::utils::get_total_norm({b.grad(), c.grad()}, INFINITY).item<double>(), 2.0);
}

TEST(ClipGrad, RefusesUndefinedTensors) {
  std::vector<Tensor> ps = {zeros({2}).requires_grad_(), Tensor()};
  EXPECT_EMBER_ERROR(clip_grad_norm_(ps, 1.0), "clip_grad_norm_: parameter 1 is undefined");
  EXPECT_EMBER_ERROR(clip_grad_value_(ps, 1.0), "clip_grad_value_: parameter 1 is undefined");
  EXPECT_EMBER_ERROR(nn::utils::get_total_norm(ps), "get_total_norm: tensor 1 is undefined");
  Tensor p = zeros({2}).requires_grad_();
  p.set_grad(ones({2}));
  EXPECT_EMBER_ERROR(nn::utils::clip_grads_with_norm_(p, 1.0, zeros({2})),
                     "clip_grads_with_norm_: total_norm must have one element, got shape [2]");
}

}  // namespace
}  // namespace ember::testing
