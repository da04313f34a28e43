// Indexing with tensors against PyTorch's rules: where the picked dims go (adjacent or not), masks,
// broadcasting, negative indices, integers selecting first, writes in place and through views, the
// gradients, and the errors. x = arange(24).view({2, 3, 4}) holds 12 i + 4 j + k at [i, j, k].
#include "ember/autograd/engine.h"
#include "ember/core/ops/advanced_indexing.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor grid() { return arange(24, kInt64).view({2, 3, 4}); }

TEST(AdvancedIndexing, IndexTensorsPickAsInPyTorch) {
  const Tensor x = grid();
  EXPECT_TRUE(x.index({tensor({1, 0})}).equal(stack({x[1], x[0]}, 0)));
  // One index tensor stays where its dim was; negative values count from the end.
  EXPECT_TRUE(x.index({Slice(), tensor({0, -1})}).equal(stack({x.select(1, 0), x.select(1, 2)}, 1)));
  // Adjacent tensors: the picks stand where the first of them was. x[:, [0, 2], [1, 3]]
  EXPECT_TRUE(x.index({Slice(), tensor({0, 2}), tensor({1, 3})}).equal(tensor({{1, 11}, {13, 23}})));
  // Apart: the picks go to the front. x[[1, 0], :, [3, 2]] -> [2, 3]
  EXPECT_TRUE(x.index({tensor({1, 0}), Slice(), tensor({3, 2})}).equal(tensor({{15, 19, 23}, {2, 6, 10}})));
  // Index tensors broadcast: x[:, [[0], [2]], [1, 3]] -> [2, 2, 2]
  EXPECT_TRUE(x.index({Slice(), tensor({{0}, {2}}), tensor({1, 3})})
                  .equal(tensor({{{1, 3}, {9, 11}}, {{13, 15}, {21, 23}}})));
  // An integer selects first (PyTorch's rule, not NumPy's): x[1, :, [0, 3]] is [3, 2].
  EXPECT_TRUE(x.index({1, Slice(), tensor({0, 3})}).equal(tensor({{12, 15}, {16, 19}, {20, 23}})));
  // With None and Ellipsis; a 0-dim index tensor drops its dim; int32 indices.
  EXPECT_EQ(x.index({None, Ellipsis, tensor({0, 1, 2})}).sizes(), (IntArrayRef{1, 2, 3, 3}));
  EXPECT_TRUE(x.index({Slice(), full({}, 2, kInt64)}).equal(x.select(1, 2)));
  EXPECT_TRUE(x.index({tensor({1}, kInt32), 2, 3}).equal(tensor({23})));
  // No picks at all, and a float tensor picked from.
  EXPECT_EQ(x.index({zeros({0}, kInt64)}).sizes(), (IntArrayRef{0, 3, 4}));
  EXPECT_CLOSE(x.to(kFloat32).index({Slice(), Slice(), tensor({2})}), x.slice(2, 2, 3).to(kFloat32));
}

TEST(AdvancedIndexing, MasksPickWhereTrue) {
  const Tensor x = grid();
  const Tensor m = tensor({{true, false, true}, {false, false, true}});
  EXPECT_TRUE(x.index({m}).equal(stack({x[0][0], x[0][2], x[1][2]}, 0)));
  EXPECT_TRUE(x.index({x > 20}).equal(x.masked_select(x > 20)));
  EXPECT_TRUE(x.index({Slice(), tensor({false, true, true})}).equal(x.slice(1, 1, 3)));
  EXPECT_TRUE(x.index({Slice(), tensor({0, 1, 1}, kUInt8)}).equal(x.slice(1, 1, 3)));
  // A 0-dim mask adds a dim of one pick or none, as x[True] and x[False].
  EXPECT_EQ(x.index({full({}, true, kBool)}).sizes(), (IntArrayRef{1, 2, 3, 4}));
  EXPECT_EQ(x.index({Slice(), full({}, false, kBool)}).sizes(), (IntArrayRef{2, 0, 3, 4}));
}

TEST(AdvancedIndexing, IndexPutWritesInPlace) {
  // labels[labels == 0] = -100
  Tensor labels = tensor({{3, 0, 5}, {0, 0, 7}});
  const uint32_t before = labels._version();
  EXPECT_EQ(&labels.index_put_({labels == 0}, -100), &labels);
  EXPECT_TRUE(labels.equal(tensor({{3, -100, 5}, {-100, -100, 7}})));
  EXPECT_GT(labels._version(), before);
  // Values broadcast to the picks; a float value into a float tensor through a view of it.
  Tensor y = zeros({3, 4});
  y.index({Slice(1, None)}).index_put_({Slice(), tensor({0, 3})}, tensor({1.0f, 2.0f}));
  EXPECT_CLOSE(y, tensor({{0.f, 0.f, 0.f, 0.f}, {1.f, 0.f, 0.f, 2.f}, {1.f, 0.f, 0.f, 2.f}}));
  // accumulate adds repeated picks up: x[[0, 0, 2]] += 1
  Tensor z = zeros({4});
  z.index_put_({tensor({0, 0, 2})}, ones({3}), true);
  EXPECT_CLOSE(z, tensor({2.f, 0.f, 1.f, 0.f}));
  // Only integers and slices: an ordinary copy into the view.
  Tensor w = zeros({2, 2});
  w.index_put_({1}, tensor({5.f, 6.f}));
  EXPECT_CLOSE(w, tensor({{0.f, 0.f}, {5.f, 6.f}}));
}

// x[:, i, :, j] = v on a [2, 3, 4, 5] tensor: the picked dims (1 and 3) cannot merge into one dim
// of a view, so the write goes through a copy; the result must match element by element.
TEST(AdvancedIndexing, IndexPutAcrossDimsThatCannotMerge) {
  Tensor x = zeros({2, 3, 4, 5}, kInt64);
  const Tensor i = tensor({2, 0}), j = tensor({4, 1});
  const Tensor v = arange(1, 17, 1, kInt64).view({2, 2, 4});  // picks first (apart), then dims 0 and 2
  x.index_put_({Slice(), i, Slice(), j}, v);
  Tensor expected = zeros({2, 3, 4, 5}, kInt64);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c)
        expected[a][i[b].item<int64_t>()][c][j[b].item<int64_t>()].fill_(v[b][a][c].item<int64_t>());
  EXPECT_TRUE(x.equal(expected));
  EXPECT_TRUE(x.index({Slice(), i, Slice(), j}).equal(v));
  // The out-of-place form leaves x alone and gives the same tensor.
  EXPECT_TRUE(index_put(zeros({2, 3, 4, 5}, kInt64), {Tensor(), i, Tensor(), j}, v).equal(expected));
}

TEST(AdvancedIndexing, GradientsReachThePickedElements) {
  Tensor x = zeros({4}).requires_grad_();
  Tensor g = autograd::grad({x.index({tensor({0, 0, 2})})}, {x}, {tensor({1.f, 10.f, 100.f})})[0];
  EXPECT_CLOSE(g, tensor({11.f, 0.f, 100.f, 0.f}));
  // index_put: x's gradient stops where values were written; values get the picks' gradient.
  Tensor a = zeros({2, 3}).requires_grad_(), v = zeros({2}).requires_grad_();
  Tensor out = index_put(a, {tensor({1, 0}), tensor({2, 0})}, v);
  std::vector<Tensor> grads = autograd::grad({out}, {a, v}, {arange(6, kFloat32).view({2, 3})});
  EXPECT_CLOSE(grads[0], tensor({{0.f, 1.f, 2.f}, {3.f, 4.f, 0.f}}));
  EXPECT_CLOSE(grads[1], tensor({5.f, 0.f}));
}

// Writes into a tensor of a graph are one recorded op, as PyTorch's x[idx] = v: the gradient
// reaches what was not overwritten, and the values at the picks.
TEST(AdvancedIndexing, InPlaceWritesInAGraphAreDifferentiable) {
  const Tensor a = arange(6, kFloat32).view({2, 3}).requires_grad_(), v = tensor({5.f, 7.f}).requires_grad_();
  Tensor x = a * 2;
  x.index_put_({Slice(), tensor({2, 0})}, v);  // x[:, [2, 0]] = v, v broadcast over the rows
  EXPECT_CLOSE(x, tensor({{7.f, 2.f, 5.f}, {7.f, 8.f, 5.f}}));
  const Tensor w = arange(6, kFloat32).view({2, 3});
  std::vector<Tensor> g = autograd::grad({x}, {a, v}, {w});
  EXPECT_CLOSE(g[0], tensor({{0.f, 2.f, 0.f}, {0.f, 8.f, 0.f}}));
  EXPECT_CLOSE(g[1], tensor({2.f + 5.f, 0.f + 3.f}));
  // accumulate keeps self's gradient whole; a mask with a scalar; a row by integer.
  Tensor y = a * 1;
  y.index_put_({tensor({1, 1})}, ones({2, 3}), true);
  EXPECT_CLOSE(autograd::grad({y.sum()}, {a})[0], ones({2, 3}));
  Tensor z = a * 1;
  z.index_put_({z > 2}, 0.0);
  EXPECT_CLOSE(autograd::grad({z.sum()}, {a})[0], tensor({{1.f, 1.f, 1.f}, {0.f, 0.f, 0.f}}));
  Tensor r = a * 1;
  r.index_put_({0}, v.sum());
  g = autograd::grad({r}, {a, v}, {w});
  EXPECT_CLOSE(g[0], tensor({{0.f, 0.f, 0.f}, {3.f, 4.f, 5.f}}));
  EXPECT_CLOSE(g[1], tensor({3.f, 3.f}));
  // A buffer that needs no grad joins the graph through the values written into it.
  Tensor buffer = zeros({4});
  buffer.index_put_({tensor({3, 0})}, v);
  EXPECT_TRUE(buffer.requires_grad());
  EXPECT_CLOSE(autograd::grad({buffer}, {v}, {tensor({1.f, 2.f, 3.f, 4.f})})[0], tensor({4.f, 1.f}));
}

TEST(AdvancedIndexing, ErrorsNameTheOpAndTheShapes) {
  const Tensor x = grid();
  EXPECT_EMBER_ERROR(x.index({Slice(), tensor({0, 3})}), "index", "index 3 is out of bounds for dimension 1",
                     "size 3");
  EXPECT_EMBER_ERROR(x.index({Slice(), tensor({-4})}), "index", "-4", "dimension 1");
  EXPECT_EMBER_ERROR(x.index({ones({2, 4}, kBool)}), "index", "mask [2, 4]", "indexed tensor [2, 3, 4]");
  EXPECT_EMBER_ERROR(x.index({tensor({0.5f})}), "index", "int64, int32, bool or uint8", "float32");
  EXPECT_EMBER_ERROR(x.index({0, 0, 0, tensor({0})}), "index", "too many indices", "dimension 3");
  EXPECT_EMBER_ERROR(x.index({tensor({0, 1}), Slice(), tensor({0, 1, 2})}), "index", "[2]", "[3]");
  Tensor y = zeros({3, 4});
  EXPECT_EMBER_ERROR(y.index_put_({tensor({0, 1})}, ones({3})), "index_put_", "value tensor of shape [3]",
                     "indexing result of shape [2, 4]");
  Tensor leaf = zeros({3}).requires_grad_();
  EXPECT_EMBER_ERROR(leaf.index_put_({tensor({0})}, 1.0), "index_put_", "leaf");
  EXPECT_EMBER_ERROR(index_put(y, {Tensor()}, ones({1})), "index_put", "at least one index tensor");
}

}  // namespace
}  // namespace ember::testing
