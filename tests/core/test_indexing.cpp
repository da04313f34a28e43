// Values come from the examples in PyTorch's documentation of each op (torch.gather,
// Tensor.scatter_, Tensor.scatter_add_, Tensor.index_add_, torch.take_along_dim,
// F.one_hot) or are hand-computed; the large cases compare with plain loops.
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/sorting.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Gather, PyTorchDocExample) {
  Tensor t = tensor({{1, 2}, {3, 4}});
  EXPECT_CLOSE(gather(t, 1, tensor({{0, 0}, {1, 0}})), tensor({{1, 1}, {4, 3}}));
  EXPECT_CLOSE(t.gather(0, tensor({{1, 0}})), tensor({{3, 2}}));  // index smaller than self
  EXPECT_CLOSE(gather(t.t(), -1, tensor({{1}, {0}})), tensor({{3}, {2}}));
  EXPECT_CLOSE(gather(tensor({true, false}), 0, tensor({1, 1, 0})), tensor({false, false, true}));
  EXPECT_CLOSE(gather(tensor(2.5), 0, tensor(0)), tensor(2.5));
  EXPECT_EQ(gather(t, 1, empty({2, 0}, kInt64)).sizes().vec(), (std::vector<int64_t>{2, 0}));
}

TEST(IndexSelect, RowsAndColumns) {
  Tensor x = arange(12).view({3, 4});
  EXPECT_CLOSE(index_select(x, 0, tensor({2, 0, 2})), tensor({{8, 9, 10, 11}, {0, 1, 2, 3}, {8, 9, 10, 11}}));
  EXPECT_CLOSE(x.index_select(1, tensor({3, 1}, kInt32)), tensor({{3, 1}, {7, 5}, {11, 9}}));
  EXPECT_CLOSE(x.t().index_select(0, tensor(1)), tensor({{1, 5, 9}}));  // 0-dim index
  EXPECT_EQ(x.index_select(0, empty({0}, kInt64)).sizes().vec(), (std::vector<int64_t>{0, 4}));
}

TEST(Scatter, PyTorchDocExamples) {
  Tensor src = arange(1, 11).view({2, 5}).to(kFloat32);
  Tensor a = scatter(zeros({3, 5}, kFloat32), 0, tensor({{0, 1, 2, 0}}), src);
  EXPECT_CLOSE(a, tensor({{1.f, 0.f, 0.f, 4.f, 0.f}, {0.f, 2.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 3.f, 0.f, 0.f}}));
  Tensor b = scatter(zeros({3, 5}, kFloat32), 1, tensor({{0, 1, 2}, {0, 1, 4}}), src);
  EXPECT_CLOSE(b, tensor({{1.f, 2.f, 3.f, 0.f, 0.f}, {6.f, 7.f, 0.f, 0.f, 8.f}, {0.f, 0.f, 0.f, 0.f, 0.f}}));
  Tensor c = scatter(full({2, 4}, 2.0), 1, tensor({{2}, {3}}), 1.23);
  EXPECT_CLOSE(c, tensor({{2.f, 2.f, 1.23f, 2.f}, {2.f, 2.f, 2.f, 1.23f}}));
  // Repeated indices: the last write along dim wins.
  EXPECT_CLOSE(scatter(zeros({2}, kInt64), 0, tensor({1, 1, 1}), tensor({5, 6, 7})), tensor({0, 7}));
}

TEST(Scatter, InPlaceWritesThroughViews) {
  Tensor x = zeros({3, 2}, kFloat32);
  Tensor view = x.t();  // [2, 3], non-contiguous
  uint32_t v = x._version();
  EXPECT_EQ(&scatter_(view, 1, tensor({{2}, {0}}), tensor({{5.f}, {6.f}})), &view);  // returns self
  EXPECT_CLOSE(x, tensor({{0.f, 6.f}, {0.f, 0.f}, {5.f, 0.f}}));
  scatter_(x, 0, tensor({{1, 1}}), 9);
  EXPECT_CLOSE(x[1], tensor({9.f, 9.f}));
  EXPECT_GT(x._version(), v);
}

TEST(ScatterAdd, AccumulatesDuplicates) {
  Tensor src = ones({2, 5}, kFloat32);
  Tensor a = scatter_add(zeros({3, 5}, kFloat32), 0, tensor({{0, 1, 2, 0, 0}}), src);
  EXPECT_CLOSE(a, tensor({{1.f, 0.f, 0.f, 1.f, 1.f}, {0.f, 1.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 1.f, 0.f, 0.f}}));
  Tensor b = scatter_add(zeros({3, 5}, kFloat32), 0, tensor({{0, 1, 2, 0, 0}, {0, 1, 2, 2, 2}}), src);
  EXPECT_CLOSE(b, tensor({{2.f, 0.f, 0.f, 1.f, 1.f}, {0.f, 2.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 2.f, 1.f, 1.f}}));
  EXPECT_CLOSE(scatter_add(zeros({3}, kInt64), 0, tensor({0, 0, 2, 0}), tensor({1, 2, 3, 4})),
               tensor({7, 0, 3}));
  Tensor h = zeros({2}, kFloat16);
  scatter_add_(h, 0, tensor({1, 1}), tensor({0.5f, 0.25f}).to(kFloat16));
  EXPECT_CLOSE(h, tensor({0.f, 0.75f}).to(kFloat16));
}

TEST(IndexAdd, PyTorchDocExample) {
  Tensor t = tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}});
  Tensor index = tensor({0, 4, 2});
  Tensor expected =
      tensor({{2.f, 3.f, 4.f}, {1.f, 1.f, 1.f}, {8.f, 9.f, 10.f}, {1.f, 1.f, 1.f}, {5.f, 6.f, 7.f}});
  EXPECT_CLOSE(index_add(ones({5, 3}, kFloat32), 0, index, t), expected);
  Tensor x = ones({5, 3}, kFloat32);
  index_add_(x, 0, index.to(kInt32), t, 2);
  EXPECT_CLOSE(
      x, tensor({{3.f, 5.f, 7.f}, {1.f, 1.f, 1.f}, {15.f, 17.f, 19.f}, {1.f, 1.f, 1.f}, {9.f, 11.f, 13.f}}));
  // Along dim 1 with a repeated index, in int32 with an integer alpha.
  Tensor y = index_add(zeros({2, 3}, kInt32), 1, tensor({2, 2}), tensor({{1, 2}, {3, 4}}, kInt32), -1);
  EXPECT_CLOSE(y, tensor({{0, 0, -3}, {0, 0, -7}}, kInt32));
}

TEST(TakeAlongDim, PyTorchDocExample) {
  Tensor t = tensor({{10, 30, 20}, {60, 40, 50}});
  EXPECT_CLOSE(take_along_dim(t, tensor({3})), tensor({60}));  // flattened
  EXPECT_CLOSE(take_along_dim(tensor(5), tensor(0)), tensor({5}));
  Tensor sorted_idx = argsort(t, 1);
  EXPECT_CLOSE(sorted_idx, tensor({{0, 2, 1}, {1, 2, 0}}));
  EXPECT_CLOSE(take_along_dim(t, sorted_idx, 1), tensor({{10, 20, 30}, {40, 50, 60}}));
  // Indices [1, 2] broadcast over the rows of t.
  EXPECT_CLOSE(take_along_dim(t, tensor({{2, 0}}), 1), tensor({{20, 10}, {50, 60}}));
  // t broadcast over the indices' columns: [2, 1] against [2, 4].
  Tensor col = tensor({{1}, {2}});
  EXPECT_CLOSE(take_along_dim(col, tensor({{1, 0, 0, 1}}), 0), tensor({{2, 1, 1, 2}}));
}

TEST(OneHot, PyTorchDocExamples) {
  Tensor i = tensor({0, 1, 2, 0, 1});  // arange(5) % 3
  EXPECT_CLOSE(one_hot(i), tensor({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 0, 0}, {0, 1, 0}}));
  EXPECT_CLOSE(one_hot(i, 5).narrow(1, 3, 2), zeros({5, 2}, kInt64));
  EXPECT_CLOSE(one_hot(tensor({{1}, {3}}), 4), tensor({{{0, 1, 0, 0}}, {{0, 0, 0, 1}}}));
  EXPECT_EQ(one_hot(empty({0}, kInt64), 3).sizes().vec(), (std::vector<int64_t>{0, 3}));
}

// The parallel paths (many lines, repeated indices) against plain loops.
TEST(Indexing, LargeAgainstLoops) {
  const int64_t rows = 1000, cols = 48, n = 5000;
  Tensor index = randint(0, rows, {n});
  Tensor source = randn({n, cols}, kFloat64);
  Tensor out = index_add(zeros({rows, cols}, kFloat64), 0, index, source);
  std::vector<double> ref(rows * cols, 0.0);
  const int64_t* ip = index.data_ptr<int64_t>();
  const double* sp = source.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) ref[ip[i] * cols + c] += sp[i * cols + c];
  EXPECT_CLOSE(out, from_blob(ref.data(), {rows, cols}, kFloat64), Tolerance{1e-12, 1e-12});
  // The same sums through scatter_add along dim 1 of the transposes.
  Tensor expanded = index.view({1, n}).expand({cols, n});
  EXPECT_CLOSE(scatter_add(zeros({cols, rows}, kFloat64), 1, expanded, source.t()), out.t(),
               Tolerance{1e-12, 1e-12});
  Tensor picked = index_select(out, 0, index);
  Tensor g = gather(out, 0, expanded.t());
  EXPECT_CLOSE(g, picked);
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) EXPECT_CLOSE(picked[i], out[ip[i]]);
}

TEST(Indexing, OutOfRangeIndicesThrowBeforeAnyWrite) {
  Tensor t = tensor({{1, 2}, {3, 4}});
  EXPECT_EMBER_ERROR(gather(t, 1, tensor({{0, 2}})),
                     "gather: index 2 is out of bounds for dimension 1 with size 2");
  EXPECT_EMBER_ERROR(gather(t, 0, tensor({{-1, 0}})),
                     "gather: index -1 is out of bounds for dimension 0 with size 2");
  EXPECT_EMBER_ERROR(index_select(t, 0, tensor({0, 3})), "index_select: index 3", "dimension 0 with size 2");
  EXPECT_EMBER_ERROR(index_select(t, 1, tensor({-1})), "index_select: index -1", "dimension 1 with size 2");
  EXPECT_EMBER_ERROR(take_along_dim(t, tensor({4})), "take_along_dim: index 4", "size 4");
  Tensor x = zeros({3}, kFloat32);
  EXPECT_EMBER_ERROR(scatter_(x, 0, tensor({0, 5}), tensor({1.f, 2.f})), "scatter_: index 5",
                     "dimension 0 with size 3");
  EXPECT_EMBER_ERROR(scatter_add_(x, 0, tensor({-4}), tensor({1.f})), "scatter_add_: index -4");
  EXPECT_EMBER_ERROR(index_add_(x, 0, tensor({1, 3}), tensor({1.f, 2.f})), "index_add_: index 3", "size 3");
  EXPECT_EMBER_ERROR(scatter(x, 0, tensor({7}), 1.0), "scatter: index 7");
  EXPECT_CLOSE(x, zeros({3}, kFloat32));  // nothing was written
  EXPECT_EMBER_ERROR(one_hot(tensor({1, -1})), "one_hot: class values must be non-negative, got -1");
  EXPECT_EMBER_ERROR(one_hot(tensor({0, 3}), 3),
                     "one_hot: class values must be smaller than num_classes (3), got 3");
}

TEST(Indexing, DtypeShapeAndDeviceErrors) {
  Tensor t = tensor({{1.f, 2.f}, {3.f, 4.f}});
  EXPECT_EMBER_ERROR(gather(t, 1, tensor({{0}}, kInt32)),
                     "gather: expected dtype int64 for index, got int32");
  EXPECT_EMBER_ERROR(index_select(t, 0, tensor({0.f})), "index_select: expected dtype int64 or int32",
                     "float32");
  EXPECT_EMBER_ERROR(scatter(t, 0, tensor({{0}}, kInt32), t), "scatter: expected dtype int64 for index");
  EXPECT_EMBER_ERROR(take_along_dim(t, tensor({{0}}, kInt32), 0),
                     "take_along_dim: dtype of indices should be int64");
  EXPECT_EMBER_ERROR(one_hot(tensor({0}, kInt32)), "one_hot: expected an int64 index tensor, got int32");
  EXPECT_EMBER_ERROR(gather(t, 0, tensor({0})),
                     "gather: index tensor must have the same number of dimensions",
                     "index [1] and self [2, 2]");
  EXPECT_EMBER_ERROR(gather(t, 0, zeros({1, 3}, kInt64)), "gather: size does not match at dimension 1",
                     "index [1, 3]", "self [2, 2] apart from dimension 0");
  EXPECT_EMBER_ERROR(gather(t, 2, tensor({{0}})), "gather: dimension out of range");
  EXPECT_EMBER_ERROR(scatter(t, 0, zeros({2, 2}, kInt64), tensor({{1.f}})), "scatter: size does not match",
                     "no larger than src [1, 1]");
  EXPECT_EMBER_ERROR(scatter(t, 0, zeros({2}, kInt64), tensor({1.f, 2.f})), "scatter: index tensor must have",
                     "dimensions as self");
  EXPECT_EMBER_ERROR(scatter(t, 0, zeros({1, 1}, kInt64), tensor({{1.0}}, kFloat64)),
                     "scatter: expected self.dtype to be equal to src.dtype, got float32 and float64");
  EXPECT_EMBER_ERROR(scatter_(zeros({1}, kFloat32).expand({3}), 0, zeros({1}, kInt64), 1.0),
                     "scatter_: unsupported operation", "single memory location");
  EXPECT_EMBER_ERROR(index_select(t, 0, zeros({1, 1}, kInt64)),
                     "index_select: index is supposed to be a vector", "[1, 1]");
  EXPECT_EMBER_ERROR(index_add(t, 0, tensor({0}), tensor({{1.f, 2.f, 3.f}})), "index_add: source [1, 3]",
                     "shape of self [2, 2] except at dimension 0", "size 1 (the number of indices)");
  EXPECT_EMBER_ERROR(index_add(t, 0, tensor({0}), tensor({{1.0, 2.0}}, kFloat64)),
                     "index_add: self (float32) and source (float64) must have the same scalar type");
  EXPECT_EMBER_ERROR(
      index_add(tensor({1, 2}), 0, tensor({0}), tensor({1}), 0.5),
      "index_add: for integral input tensors, argument alpha must not be a floating point number");
  EXPECT_EMBER_ERROR(take_along_dim(t, tensor({0}), 0),
                     "take_along_dim: input and indices should have the same", "[2, 2] and [1]");
  EXPECT_EMBER_ERROR(take_along_dim(t, zeros({3, 1}, kInt64), 1),
                     "take_along_dim: shapes [2, 1] and [3, 1] cannot be broadcast");
  EXPECT_EMBER_ERROR(one_hot(empty({0}, kInt64)),
                     "one_hot: can not infer the number of classes from an empty");
  EXPECT_EMBER_ERROR(one_hot(tensor({0}), -2), "one_hot: num_classes must be -1 or non-negative, got -2");
}

}  // namespace
}  // namespace ember::testing
