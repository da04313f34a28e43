// Backward of the shape, indexing, sorting and scan ops: gradients checked against hand-computed
// values, 0-dim inputs, dtype casts, and the in-place variants' refusals. (The gradcheck cases
// in gradcheck_shape.cpp check the formulas numerically.)
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor param(const NestedList& v) { return tensor(v, kFloat64).requires_grad_(); }

// d(sum(w * f(x)))/dx.
Tensor grad_of(const Tensor& out, const Tensor& x, const Tensor& w) {
  return autograd::grad({(out * w).sum()}, {x})[0];
}

TEST(ShapeBackward, ReflectAndReplicatePadsAddUpTheCopies) {
  // reflect (2, 1) of [x0, x1, x2] reads [x2, x1, x0, x1, x2, x1]; replicate reads
  // [x0, x0, x0, x1, x2, x2]. With weights 1..6: reflect x0 = 3, x1 = 2 + 4 + 6, x2 = 1 + 5;
  // replicate x0 = 1 + 2 + 3, x1 = 4, x2 = 5 + 6.
  Tensor x = param({1.0, 2.0, 3.0});
  Tensor w = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, kFloat64);
  EXPECT_CLOSE(grad_of(pad(x, {2, 1}, "reflect"), x, w), tensor({3.0, 12.0, 6.0}, kFloat64));
  EXPECT_CLOSE(grad_of(pad(x, {2, 1}, "replicate"), x, w), tensor({6.0, 4.0, 11.0}, kFloat64));
  // constant: the padding's gradient is dropped; a negative pad (a crop) gives zeros.
  EXPECT_CLOSE(grad_of(pad(x, {-1, 3}, "constant", 7.0), x, w.narrow(0, 0, 5)),
               tensor({0.0, 1.0, 2.0}, kFloat64));
}

TEST(ShapeBackward, SortAndTopkSendGradientsToTheIndices) {
  // sort([3, 1, 2]) = [1, 2, 3] from indices [1, 2, 0]; topk(2) = [3, 2] from [0, 2].
  Tensor x = param({3.0, 1.0, 2.0});
  Tensor w = tensor({10.0, 20.0, 30.0}, kFloat64);
  EXPECT_CLOSE(grad_of(std::get<0>(sort(x)), x, w), tensor({30.0, 10.0, 20.0}, kFloat64));
  EXPECT_CLOSE(grad_of(std::get<0>(topk(x, 2)), x, w.narrow(0, 0, 2)), tensor({10.0, 0.0, 20.0}, kFloat64));
}

TEST(ShapeBackward, ScatterSplitsTheGradientBetweenSelfAndSrc) {
  // scatter along dim 1 of a [2, 3] src through index [[2], [0]]: only src[0][0] and src[1][0]
  // are written (to out[0][2] and out[1][0]); self keeps the gradient elsewhere.
  Tensor x = param({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor src = param({{7.0, 8.0, 9.0}, {10.0, 11.0, 12.0}});
  Tensor index = tensor({{2}, {0}}, kInt64);
  Tensor w = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64);
  std::vector<Tensor> g = autograd::grad({(scatter(x, 1, index, src) * w).sum()}, {x, src});
  EXPECT_CLOSE(g[0], tensor({{1.0, 2.0, 0.0}, {0.0, 5.0, 6.0}}, kFloat64));
  EXPECT_CLOSE(g[1], tensor({{3.0, 0.0, 0.0}, {4.0, 0.0, 0.0}}, kFloat64));
  // scatter_add keeps self's gradient whole.
  g = autograd::grad({(scatter_add(x, 1, index, src) * w).sum()}, {x, src});
  EXPECT_CLOSE(g[0], w);
  EXPECT_CLOSE(g[1], tensor({{3.0, 0.0, 0.0}, {4.0, 0.0, 0.0}}, kFloat64));
}

TEST(ShapeBackward, IndexAddScalesTheSourceGradientByAlpha) {
  Tensor x = param({1.0, 2.0, 3.0});
  Tensor source = param({5.0, 6.0});
  Tensor w = tensor({1.0, 2.0, 3.0}, kFloat64);
  std::vector<Tensor> g =
      autograd::grad({(index_add(x, 0, tensor({2, 2}, kInt32), source, -2) * w).sum()}, {x, source});
  EXPECT_CLOSE(g[0], w);
  EXPECT_CLOSE(g[1], tensor({-6.0, -6.0}, kFloat64));
}

TEST(ShapeBackward, TakeAlongDimSumsOverTheBroadcast) {
  // x [1, 3] against indices [2, 1] along dim 1: both rows read x[0][2].
  Tensor x = param({{1.0, 2.0, 3.0}});
  Tensor out = take_along_dim(x, tensor({{2}, {2}}, kInt64), 1);
  EXPECT_CLOSE(grad_of(out, x, tensor({{1.0}, {5.0}}, kFloat64)), tensor({{0.0, 0.0, 6.0}}, kFloat64));
}

TEST(ShapeBackward, CumsumRepeatAndRollByHand) {
  Tensor x = param({1.0, 2.0, 3.0});
  Tensor w = tensor({1.0, 10.0, 100.0}, kFloat64);
  // out_i = x_0 + ... + x_i: x_j gets the weights of outputs j and after.
  EXPECT_CLOSE(grad_of(x.cumsum(0), x, w), tensor({111.0, 110.0, 100.0}, kFloat64));
  // roll by 1 moves x_j to output j + 1 (mod 3).
  EXPECT_CLOSE(grad_of(roll(x, {1}), x, w), tensor({10.0, 100.0, 1.0}, kFloat64));
  Tensor y = param({1.0, 2.0});
  EXPECT_CLOSE(grad_of(y.repeat({2, 2}), y, tensor({{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}}, kFloat64)),
               tensor({1.0 + 3 + 5 + 7, 2.0 + 4 + 6 + 8}, kFloat64));
}

TEST(ShapeBackward, CumsumToAWiderDtypeCastsTheGradientBack) {
  Tensor x = tensor({1.0, 2.0}, kFloat32).requires_grad_();
  Tensor out = cumsum(x, 0, kFloat64);
  EXPECT_EQ(out.dtype(), kFloat64);
  out.sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_CLOSE(x.grad(), tensor({2.0, 1.0}, kFloat32));
}

TEST(ShapeBackward, ZeroDimInputs) {
  Tensor x = tensor(2.5, kFloat64).requires_grad_();
  Tensor i = tensor(0, kInt64);
  Tensor outs[] = {x.flip({}),
                   roll(x, {3}),
                   pad(x, {}),
                   x.repeat({3}).sum(),
                   x.index_select(0, i),
                   x.gather(0, i),
                   take_along_dim(x, tensor({0, 0}, kInt64)).sum(),
                   std::get<0>(sort(x)),
                   std::get<0>(topk(x, 1)),
                   x.cumsum(0),
                   scatter_add(x, 0, i, x * 2)};
  const double expected[] = {1, 1, 1, 3, 1, 1, 2, 1, 1, 1, 3};
  for (size_t k = 0; k < std::size(outs); ++k) {
    SCOPED_TRACE(k);
    Tensor g = autograd::grad({outs[k]}, {x})[0];
    EXPECT_EQ(g.dim(), 0);
    EXPECT_DOUBLE_EQ(g.item<double>(), expected[k]);
  }
}

TEST(ShapeBackward, InPlaceVariantsRefuseTensorsThatRequireGrad) {
  Tensor index = tensor({{0, 1}}, kInt64);
  Tensor leaf = zeros({2, 2}, kFloat64).requires_grad_();
  Tensor src = ones({1, 2}, kFloat64).requires_grad_();
  Tensor plain = zeros({2, 2}, kFloat64);
  EXPECT_EMBER_ERROR(scatter_(leaf, 0, index, ones({1, 2}, kFloat64)), "scatter_", "leaf tensor");
  EXPECT_EMBER_ERROR(scatter_(leaf, 0, index, 1.0), "scatter_", "leaf tensor");
  EXPECT_EMBER_ERROR(scatter_(plain, 0, index, src), "scatter_", "in-place operations");
  EXPECT_EMBER_ERROR(scatter_add_(plain, 0, index, src), "scatter_add_", "in-place operations");
  EXPECT_EMBER_ERROR(index_add_(plain, 0, tensor({1}, kInt64), src), "index_add_", "in-place operations");
  EXPECT_EMBER_ERROR(index_add_(leaf, 0, tensor({1}, kInt64), ones({1, 2}, kFloat64)), "index_add_",
                     "leaf tensor");
  EXPECT_CLOSE(plain, zeros({2, 2}, kFloat64));  // nothing was written
  {
    // The usual way to update a leaf in place.
    NoGradGuard no_grad;
    scatter_add_(leaf, 0, index, src);  // leaf[0][0] and leaf[1][1] += 1
    index_add_(leaf, 1, tensor({0}, kInt64), ones({2, 1}, kFloat64), 2);
  }
  EXPECT_CLOSE(leaf.detach(), tensor({{3.0, 0.0}, {2.0, 1.0}}, kFloat64));
}

TEST(ShapeBackward, SavedIndexModifiedInPlaceIsCaught) {
  Tensor x = param({1.0, 2.0, 3.0});
  Tensor index = tensor({0, 2}, kInt64);
  Tensor out = x.gather(0, index);
  index.fill_(1);
  EXPECT_EMBER_ERROR(out.sum().backward(), "modified by an inplace operation", "gather");
}

}  // namespace
}  // namespace ember::testing
