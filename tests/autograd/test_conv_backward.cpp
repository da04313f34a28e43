// Backward of the convolutions and pooling: values against hand computation, windows that miss
// the input, empty batches, lower precision and the graph that create_graph builds.
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor leaf(const NestedList& v) { return tensor(v, kFloat64).requires_grad_(); }

TEST(ConvBackward, Conv1dGradientsByHand) {
  // y = [x0 - x1, x1 - x2] + b; L = y0 + 2 y1: dL/dx = [1, 2 - 1, -2],
  // dL/dw = [1 x0 + 2 x1, 1 x1 + 2 x2] = [5, 8], dL/db = 3.
  Tensor x = leaf({{{1.0, 2.0, 3.0}}}), w = leaf({{{1.0, -1.0}}}), b = leaf({0.5});
  (conv1d(x, w, b) * tensor({1.0, 2.0}, kFloat64)).sum().backward();
  EXPECT_CLOSE(x.grad(), tensor({{{1.0, 1.0, -2.0}}}, kFloat64));
  EXPECT_CLOSE(w.grad(), tensor({{{5.0, 8.0}}}, kFloat64));
  EXPECT_CLOSE(b.grad(), tensor({3.0}, kFloat64));
}

TEST(ConvBackward, TransposedConvolutionIsTheAdjoint) {
  // <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>, and the gradient of the first w.r.t. x
  // is the second (stride and "same"-style padding that leaves rows over).
  Tensor x = random_tensor({2, 4, 7, 7}, kFloat64).requires_grad_();
  Tensor w = random_tensor({6, 2, 3, 2}, kFloat64);
  Tensor y = conv2d(x.detach(), w, {}, 2, 1, 1, 2);
  Tensor r = random_tensor(y.sizes(), kFloat64);
  (conv2d(x, w, {}, 2, 1, 1, 2) * r).sum().backward();
  Tensor t = conv_transpose2d(r, w, {}, 2, 1, {0, 1}, 2);
  ASSERT_TRUE(t.sizes().equals(x.sizes()));
  EXPECT_CLOSE(x.grad(), t);
}

TEST(ConvBackward, EmptyBatchGivesZeroWeightGradients) {
  Tensor x = zeros({0, 2, 4, 4}, kFloat64).requires_grad_();
  Tensor w = random_tensor({3, 2, 3, 3}, kFloat64).requires_grad_();
  Tensor b = random_tensor({3}, kFloat64).requires_grad_();
  conv2d(x, w, b, 1, 1).sum().backward();
  EXPECT_TRUE(x.grad().sizes().equals(x.sizes()));
  EXPECT_CLOSE(w.grad(), zeros({3, 2, 3, 3}, kFloat64));
  EXPECT_CLOSE(b.grad(), zeros({3}, kFloat64));
}

TEST(ConvBackward, LowerPrecisionMatchesFloat64) {
  for (ScalarType dt : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(to_string(dt));
    // Inputs exactly representable in dt: only the computation's rounding remains.
    Tensor x = random_tensor({2, 4, 6, 6}, dt).to(kFloat64);
    Tensor w = random_tensor({4, 2, 3, 3}, dt).to(kFloat64);
    Tensor r = random_tensor({2, 4, 3, 3}, dt).to(kFloat64);
    std::vector<Tensor> ref = autograd::grad(
        {conv2d(x.requires_grad_(), w.requires_grad_(), {}, 2, 1, 1, 2)}, {x, w}, {r});
    Tensor xl = x.detach().to(dt).requires_grad_(), wl = w.detach().to(dt).requires_grad_();
    std::vector<Tensor> got =
        autograd::grad({conv2d(xl, wl, {}, 2, 1, 1, 2)}, {xl, wl}, {r.to(dt)});
    EXPECT_EQ(got[1].dtype(), dt);
    // One rounding to dt of a float32 sum.
    Tolerance tol = default_tolerance(dt);
    tol = {tol.rtol * 8, tol.atol * 8};
    EXPECT_CLOSE(got[0].to(kFloat64), ref[0], tol);
    EXPECT_CLOSE(got[1].to(kFloat64), ref[1], tol);
  }
}

TEST(ConvBackward, CreateGraphRecordsTheAdjointConvolutions) {
  Tensor x = random_tensor({1, 2, 4, 4}, kFloat64).requires_grad_();
  Tensor w = random_tensor({2, 2, 3, 3}, kFloat64).requires_grad_();
  Tensor y = conv2d(x, w);
  std::vector<Tensor> g = autograd::grad({y.sum()}, {x, w}, {}, false, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  EXPECT_EQ(g[0].grad_fn()->name(), "conv_transpose2d");
  ASSERT_TRUE(g[1].requires_grad());
  // d/dw of sum(dL/dx) with dL/dx = conv_transpose2d(ones, w): each weight element meets the
  // ones over a 2 x 2 window of outputs, so every entry is 4.
  g[0].sum().backward();
  EXPECT_CLOSE(w.grad(), full({2, 2, 3, 3}, 4.0, kFloat64));
}

TEST(PoolBackward, MaxPoolWindowsThatMissTheInputSendNoGradient) {
  // Width 1, taps at -1 and 1: every window misses (value -inf, index -1).
  Tensor x = leaf({{{1.0}, {2.0}}});
  auto [out, idx] = max_pool2d_with_indices(x, {1, 2}, {1, 1}, {0, 1}, {1, 2});
  EXPECT_CLOSE(idx, full({1, 2, 1}, int64_t{-1}, kInt64));
  out.backward(ones_like(out));
  EXPECT_CLOSE(x.grad(), zeros({1, 2, 1}, kFloat64));
}

TEST(PoolBackward, MaxPoolGradientGoesToEachArgmax) {
  // Overlapping windows share the maximum 9: it collects the gradient of both.
  Tensor x = leaf({{{1.0, 9.0, 2.0}, {3.0, 4.0, 5.0}}});
  max_pool2d(x, 2, 1).sum().backward();
  EXPECT_CLOSE(x.grad(), tensor({{{0.0, 2.0, 0.0}, {0.0, 0.0, 0.0}}}, kFloat64));
}

TEST(PoolBackward, AvgPoolGradientByHand) {
  // Width 6, kernel 3, stride 2, padding 1, ceil_mode: windows [-1, 2), [1, 4), [3, 6) and
  // [5, 8), the last reaching past the padding (at 7).
  const NestedList values = {{{1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}};
  // count_include_pad: divisors 3, 3, 3 and 2 (the padding counts, what lies past it not).
  Tensor x = leaf(values);
  avg_pool2d(x, {1, 3}, {1, 2}, {0, 1}, true, true).sum().backward();
  const double third = 1 / 3.0;
  EXPECT_CLOSE(x.grad(),
               tensor({{{third, 2 * third, third, 2 * third, third, third + 0.5}}}, kFloat64));
  // Without: divisors 2, 3, 3 and 1.
  Tensor y = leaf(values);
  avg_pool2d(y, {1, 3}, {1, 2}, {0, 1}, true, false).sum().backward();
  EXPECT_CLOSE(y.grad(),
               tensor({{{0.5, 0.5 + third, third, 2 * third, third, third + 1}}}, kFloat64));
}

TEST(PoolBackward, AdaptiveAvgPoolGradientByHand) {
  // Width 3 to 2: windows [0, 2) and [1, 3), each of 2; x1 is in both.
  Tensor x = leaf({{{1.0, 2.0, 3.0}}});
  adaptive_avg_pool2d(x, {1, 2}).sum().backward();
  EXPECT_CLOSE(x.grad(), tensor({{{0.5, 1.0, 0.5}}}, kFloat64));
}

}  // namespace
}  // namespace ember::testing
