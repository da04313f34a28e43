// Gradients of the reductions where gradcheck cannot tell: zeros in prod, ties and NaN in
// max/min, the non-differentiable points of norm and std. Expected values are hand computed.
#include <cmath>
#include <tuple>

#include "test_util.h"

namespace ember::testing {
namespace {

Tensor input(const NestedList& values) { return tensor(values, kFloat64).requires_grad_(); }
Tensor expected(const NestedList& values) { return tensor(values, kFloat64); }

// Keeps the graph: some tests differentiate several entries of one gradient.
Tensor grad_of(const Tensor& y, const Tensor& x) {
  return autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true)[0];
}

TEST(ReduceBackward, ProdIsTheProductOfTheOthersAlsoAtZeros) {
  // Rows with no zero, one zero, two zeros.
  Tensor x = input({{2, 3, 4}, {2, 0, 3}, {0, 2, 0}});
  EXPECT_CLOSE(grad_of(x.prod(1), x), expected({{12, 8, 6}, {0, 6, 0}, {0, 0, 0}}));
  Tensor v = input({2, 0, 3, 4});
  EXPECT_CLOSE(grad_of(v.prod(), v), expected({0, 24, 0, 0}));
  // Second derivatives with two zeros: d2 prod / dx0 dx1 = x2 = 3, though the gradient is 0.
  Tensor w = input({0, 0, 3});
  Tensor dw = autograd::grad({w.prod()}, {w}, {}, false, /*create_graph=*/true)[0];
  EXPECT_CLOSE(dw, expected({0, 0, 0}));
  EXPECT_CLOSE(grad_of(dw[0], w), expected({0, 3, 0}));
  // And with one zero: d2 prod / dx1 dx2 = x0 = 0, d2 prod / dx0 dx1 = x2 = 3.
  Tensor u = input({0, 2, 3});
  Tensor du = autograd::grad({u.prod()}, {u}, {}, false, true)[0];
  EXPECT_CLOSE(du, expected({6, 0, 0}));
  EXPECT_CLOSE(grad_of(du[1], u), expected({3, 0, 0}));
  EXPECT_CLOSE(grad_of(du[0], u), expected({0, 3, 2}));
}

TEST(ReduceBackward, FullMaxMinAndAmaxShareTiesEvenly) {
  Tensor x = input({1, 3, 3});
  EXPECT_CLOSE(grad_of(x.max(), x), expected({0, 0.5, 0.5}));
  Tensor m = input({{2, 1}, {1, 5}});
  EXPECT_CLOSE(grad_of(m.min(), m), expected({{0, 0.5}, {0.5, 0}}));
  Tensor a = input({{1, 5, 5}, {2, 0, 2}});
  EXPECT_CLOSE(grad_of(a.amax({1}), a), expected({{0, 0.5, 0.5}, {0.5, 0, 0.5}}));
  EXPECT_CLOSE(grad_of(a.amin({0}, true), a), expected({{1, 0, 0}, {0, 1, 1}}));
  // A NaN maximum takes the whole gradient.
  Tensor n = input({1, NAN, 2});
  EXPECT_CLOSE(grad_of(n.max(), n), expected({0, 1, 0}));
}

TEST(ReduceBackward, MaxAlongADimGoesToTheReturnedIndex) {
  Tensor x = input({{1, 5, 5}, {2, 0, 2}});
  auto [values, indices] = x.max(1);
  EXPECT_CLOSE(indices, tensor({1, 0}, kInt64));
  EXPECT_CLOSE(grad_of(values, x), expected({{0, 1, 0}, {1, 0, 0}}));
  Tensor mins = std::get<0>(x.min(0, true));
  EXPECT_CLOSE(grad_of(mins * expected({{1, 2, 3}}), x), expected({{1, 0, 0}, {0, 2, 3}}));
  Tensor s = input(4.0);
  EXPECT_CLOSE(grad_of(std::get<0>(s.max(0)), s), expected(1.0));
}

TEST(ReduceBackward, NormAtItsNonDifferentiablePoints) {
  Tensor zero = input({0, 0, 0});
  EXPECT_CLOSE(grad_of(zero.norm(), zero), expected({0, 0, 0}));
  Tensor x = input({-3, 3, 1});
  EXPECT_CLOSE(grad_of(x.norm(INFINITY), x), expected({-0.5, 0.5, 0}));
  EXPECT_CLOSE(grad_of(x.norm(-INFINITY), x), expected({0, 0, 1}));
  EXPECT_CLOSE(grad_of(x.norm(0), x), expected({0, 0, 0}));
  Tensor z = input({-2, 0, 3});
  EXPECT_CLOSE(grad_of(z.norm(1), z), expected({-1, 0, 1}));
  // p = 0.5: norm = (0 + 2 + 1)^2 = 9, d/dx = sign(x) |x|^-0.5 norm^0.5, 0 at x = 0.
  Tensor h = input({0, 4, 1});
  EXPECT_CLOSE(grad_of(h.norm(0.5), h), expected({0, 1.5, 3}));
  // p = 3: norm = (8 + 1)^(1/3), d/dx = x |x| norm^-2.
  Tensor c = input({-2, 1, 0});
  double n2 = std::pow(9.0, 2.0 / 3);
  EXPECT_CLOSE(grad_of(c.norm(3), c), expected({-4 / n2, 1 / n2, 0}));
}

TEST(ReduceBackward, VarStdAndLogsumexpValues) {
  // mean 2.5: d var / dx = 2 (x - 2.5) / 3, d std / dx = (x - 2.5) / (3 std).
  Tensor x = input({1, 2, 3, 4});
  EXPECT_CLOSE(grad_of(x.var(), x), expected({-1, -1.0 / 3, 1.0 / 3, 1}));
  double sd = std::sqrt(5.0 / 3);
  EXPECT_CLOSE(grad_of(x.std(), x),
               expected({-1.5 / (3 * sd), -0.5 / (3 * sd), 0.5 / (3 * sd), 1.5 / (3 * sd)}));
  EXPECT_CLOSE(grad_of(x.var({}, 0), x), expected({-0.75, -0.25, 0.25, 0.75}));
  // A constant: std is 0 and so is its gradient (as PyTorch).
  Tensor c = input({2, 2, 2});
  EXPECT_CLOSE(grad_of(c.std(), c), expected({0, 0, 0}));
  // No degrees of freedom: the gradient is NaN (as PyTorch).
  Tensor one = input({1});
  EXPECT_TRUE(std::isnan(grad_of(one.var(), one).item<double>()));
  // The softmax: exp(x) / (1 + 3).
  Tensor l = input({{0, std::log(3.0)}});
  EXPECT_CLOSE(grad_of(l.logsumexp({1}), l), expected({{0.25, 0.75}}));
}

}  // namespace
}  // namespace ember::testing
