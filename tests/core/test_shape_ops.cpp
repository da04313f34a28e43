// Values are hand-computed or taken from the examples in PyTorch's documentation of each op
// (torch.roll, torch.Tensor.repeat, torch.nn.functional.pad, torch.tril); errors check their
// messages.
#include "ember/core/ops/shape_ops.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor iota(IntArrayRef sizes, ScalarType dt = kFloat32) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return arange(n).to(dt).view(sizes);
}

TEST(Cat, PromotesAcrossInputs) {
  Tensor out = cat({tensor({1, 2}), tensor({0.5f})});
  EXPECT_CLOSE(out, tensor({1.f, 2.f, 0.5f}));  // int64 + float32 -> float32
  EXPECT_CLOSE(cat({tensor({true}), tensor({3}, kInt32)}), tensor({1, 3}, kInt32));
  EXPECT_CLOSE(cat({tensor({1.f}).to(kFloat16), tensor({2.f}).to(kBFloat16)}), tensor({1.f, 2.f}));
}

TEST(Cat, AlongInnerDimAndNonContiguous) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  EXPECT_CLOSE(cat({a, tensor({{5}, {6}})}, 1), tensor({{1, 2, 5}, {3, 4, 6}}));
  EXPECT_CLOSE(cat({a.t(), a}, -2), tensor({{1, 3}, {2, 4}, {1, 2}, {3, 4}}));
  EXPECT_CLOSE(cat({a}, 0), a);
  EXPECT_CLOSE(cat({zeros({2, 0}), a.to(kFloat32)}, 1), a.to(kFloat32));
}

TEST(Cat, SkipsLegacyEmptyTensorsButKeepsTheirDtype) {
  Tensor out = cat({empty({0}, kFloat64), tensor({{1.f, 2.f}}), empty({0}, kFloat32)}, 1);
  EXPECT_CLOSE(out, tensor({{1.0, 2.0}}, kFloat64));
  EXPECT_EQ(cat({empty({0}), empty({0})}).sizes().vec(), std::vector<int64_t>{0});
}

TEST(Stack, NewDim) {
  Tensor a = tensor({1, 2}), b = tensor({3, 4});
  EXPECT_CLOSE(stack({a, b}), tensor({{1, 2}, {3, 4}}));
  EXPECT_CLOSE(stack({a, b}, 1), tensor({{1, 3}, {2, 4}}));
  EXPECT_CLOSE(stack({a, b}, -1), tensor({{1, 3}, {2, 4}}));
  EXPECT_CLOSE(stack({tensor(1.5), tensor(2)}), tensor({1.5f, 2.f}));  // 0-dim inputs, promoted
}

TEST(Flip, Dims) {
  Tensor x = iota({2, 3}, kInt64);
  EXPECT_CLOSE(flip(x, {1}), tensor({{2, 1, 0}, {5, 4, 3}}));
  EXPECT_CLOSE(x.flip({0, -1}), tensor({{5, 4, 3}, {2, 1, 0}}));
  EXPECT_CLOSE(flip(x, {}), x);
  EXPECT_CLOSE(flip(x.t(), {0}), tensor({{2, 5}, {1, 4}, {0, 3}}));
  EXPECT_CLOSE(flip(tensor({true, false, false}), {0}), tensor({false, false, true}));
  EXPECT_CLOSE(flip(tensor(7.f), {0}), tensor(7.f));
}

TEST(Roll, PyTorchDocExamples) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6, 7, 8}).view({4, 2});
  EXPECT_CLOSE(roll(x, {1}), tensor({{8, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_CLOSE(roll(x, {1}, {0}), tensor({{7, 8}, {1, 2}, {3, 4}, {5, 6}}));
  EXPECT_CLOSE(roll(x, {-1}, {0}), tensor({{3, 4}, {5, 6}, {7, 8}, {1, 2}}));
  EXPECT_CLOSE(roll(x, {2, 1}, {0, 1}), tensor({{6, 5}, {8, 7}, {2, 1}, {4, 3}}));
  EXPECT_CLOSE(roll(x, {9}, {0}), roll(x, {1}, {0}));        // shifts wrap
  EXPECT_CLOSE(roll(x, {1, 1}, {0, 0}), roll(x, {2}, {0}));  // a repeated dim adds up
  // Flattened roll of a transposed view: [1, 3, 5, 7, 2, 4, 6, 8] rolled by 1.
  EXPECT_CLOSE(roll(x.t(), {1}), tensor({{8, 1, 3, 5}, {7, 2, 4, 6}}));
  EXPECT_CLOSE(roll(tensor(3.f), {2}), tensor(3.f));
}

TEST(Pad, Modes) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  EXPECT_CLOSE(pad(x, {2, 1}, "reflect"), tensor({3.f, 2.f, 1.f, 2.f, 3.f, 4.f, 3.f}));
  EXPECT_CLOSE(pad(x, {2, 1}, "replicate"), tensor({1.f, 1.f, 1.f, 2.f, 3.f, 4.f, 4.f}));
  EXPECT_CLOSE(pad(x, {1, 2}, "constant", 9), tensor({9.f, 1.f, 2.f, 3.f, 4.f, 9.f, 9.f}));
  EXPECT_CLOSE(pad(x, {1, 2}), tensor({0.f, 1.f, 2.f, 3.f, 4.f, 0.f, 0.f}));
  EXPECT_CLOSE(pad(x, {-1, 1}), tensor({2.f, 3.f, 4.f, 0.f}));  // a negative pad crops
  EXPECT_CLOSE(pad(x, {-2, -2}), empty({0}));
  EXPECT_CLOSE(pad(tensor({{1, 2}}), {0, 0, 1, 0}, "constant", 7), tensor({{7, 7}, {1, 2}}));
  // 2-D reflect: pads the last dim by (1, 0) and the first by (0, 1).
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_CLOSE(pad(m, {1, 0, 0, 1}, "reflect"), tensor({{2, 1, 2, 3}, {5, 4, 5, 6}, {2, 1, 2, 3}}));
  EXPECT_CLOSE(pad(m.t(), {1, 1}, "replicate"), tensor({{1, 1, 4, 4}, {2, 2, 5, 5}, {3, 3, 6, 6}}));
  EXPECT_CLOSE(pad(empty({0, 2}), {0, 0, 1, 1}, "constant", 1), ones({2, 2}, kFloat32));
  EXPECT_EQ(pad(empty({2, 0}), {0, 0}, "reflect").sizes().vec(), (std::vector<int64_t>{2, 0}));
}

TEST(Pad, LargeMatchesSlicesOfItsOutput) {
  Tensor x = randn({300, 257});
  Tensor out = pad(x.t(), {3, 5, 2, 0}, "constant", -1);
  ASSERT_EQ(out.sizes().vec(), (std::vector<int64_t>{259, 308}));
  EXPECT_CLOSE(out.slice(0, 2).slice(1, 3, 303), x.t());
  EXPECT_CLOSE(out.slice(0, 0, 2), full({2, 308}, -1.f));
  EXPECT_CLOSE(out.slice(1, 0, 3), full({259, 3}, -1.f));
  EXPECT_CLOSE(out.slice(1, 303), full({259, 5}, -1.f));
  Tensor r = pad(x, {4, 4}, "reflect");
  EXPECT_CLOSE(r.slice(1, 4, 261), x);
  EXPECT_CLOSE(r.slice(1, 0, 4), x.slice(1, 1, 5).flip({1}));
}

TEST(Repeat, PyTorchDocExamples) {
  Tensor x = tensor({1, 2, 3});
  Tensor r = x.repeat({4, 2});
  ASSERT_EQ(r.sizes().vec(), (std::vector<int64_t>{4, 6}));
  for (int64_t i = 0; i < 4; ++i) EXPECT_CLOSE(r[i], tensor({1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(x.repeat({4, 2, 1}).sizes().vec(), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_CLOSE(tensor({{1, 2}, {3, 4}}).t().repeat({1, 2}), tensor({{1, 3, 1, 3}, {2, 4, 2, 4}}));
  EXPECT_CLOSE(repeat(tensor(5), {2}), tensor({5, 5}));
  EXPECT_EQ(repeat(x, {0, 2}).sizes().vec(), (std::vector<int64_t>{0, 6}));
}

TEST(Tri, DiagonalOffsetsAndBatches) {
  Tensor m = iota({3, 3}, kInt64) + 1;  // [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
  EXPECT_CLOSE(m.tril(), tensor({{1, 0, 0}, {4, 5, 0}, {7, 8, 9}}));
  EXPECT_CLOSE(m.tril(-1), tensor({{0, 0, 0}, {4, 0, 0}, {7, 8, 0}}));
  EXPECT_CLOSE(m.triu(1), tensor({{0, 2, 3}, {0, 0, 6}, {0, 0, 0}}));
  EXPECT_CLOSE(m.triu(-1), tensor({{1, 2, 3}, {4, 5, 6}, {0, 8, 9}}));
  EXPECT_CLOSE(m.tril(5), m);
  EXPECT_CLOSE(m.triu(-100), m);
  EXPECT_CLOSE(m.triu(100), zeros_like(m));
  EXPECT_CLOSE(tril(tensor({{1.f, 2.f, 3.f}}), 1), tensor({{1.f, 2.f, 0.f}}));
  EXPECT_CLOSE(triu(m.t()), tensor({{1, 4, 7}, {0, 5, 8}, {0, 0, 9}}));
  Tensor b = stack({m, m * 10});
  EXPECT_CLOSE(tril(b, -1)[1], tensor({{0, 0, 0}, {40, 0, 0}, {70, 80, 0}}));
}

TEST(ShapeOps, LargeInverses) {
  Tensor x = randn({64, 300}).t();  // non-contiguous, enough rows for several threads
  EXPECT_CLOSE(flip(flip(x, {0, 1}), {1, 0}), x);
  EXPECT_CLOSE(roll(roll(x, {7, -3}, {0, 1}), {-7, 3}, {0, 1}), x);
  EXPECT_CLOSE(x.repeat({2, 3}).slice(0, 300).slice(1, 128, 192), x);
}

TEST(ShapeOps, Errors) {
  Tensor x = zeros({2, 3});
  EXPECT_EMBER_ERROR(cat({x, x, zeros({3, 4})}), "cat: sizes of tensors must match except in dimension 0",
                     "expected size 3 but got size 4 for tensor number 2");
  EXPECT_EMBER_ERROR(cat({x, zeros({2})}, 0), "cat: tensors must have the same number of dimensions",
                     "tensor number 1");
  EXPECT_EMBER_ERROR(cat({x, tensor(1.f)}), "cat: zero-dimensional tensor (at position 1)");
  EXPECT_EMBER_ERROR(cat(std::vector<Tensor>{}), "cat: expected a non-empty list");
  EXPECT_EMBER_ERROR(cat({x, x}, 2), "cat: dimension out of range");
  EXPECT_EMBER_ERROR(stack({x, zeros({2, 4})}), "stack: expects each tensor to be equal size",
                     "[2, 3] at entry 0", "[2, 4] at entry 1");
  EXPECT_EMBER_ERROR(flip(x, {0, -2}), "flip: dim 0 appears multiple times");
  EXPECT_EMBER_ERROR(flip(x, {2}), "flip: dimension out of range");
  EXPECT_EMBER_ERROR(roll(x, {1, 2}, {0}), "roll: shifts and dims must align", "2 shifts and 1 dims");
  EXPECT_EMBER_ERROR(roll(x, {1, 2}), "roll: shifts and dims must align");
  EXPECT_EMBER_ERROR(roll(x, {}), "roll: shifts must not be empty");
  EXPECT_EMBER_ERROR(pad(tensor({1.f, 2.f, 3.f}), {3, 0}, "reflect"), "pad: reflect padding (3, 0)",
                     "less than the size 3 of dimension 0");
  EXPECT_EMBER_ERROR(pad(x, {0, 2, 2, 0}, "reflect"), "pad: reflect padding (2, 0)", "size 2 of dimension 0");
  EXPECT_EMBER_ERROR(pad(x, {1}), "pad: padding length must be divisible by 2, got 1");
  EXPECT_EMBER_ERROR(pad(x, {1, 1, 1, 1, 1, 1}), "pad: padding length 6 is too large", "[2, 3]");
  EXPECT_EMBER_ERROR(pad(x, {-2, -2}),
                     "pad: the input size 3 plus padding (-2, -2) gives a negative size -1");
  EXPECT_EMBER_ERROR(pad(x, {1, 1}, "circular"), "pad: mode must be", "'circular'");
  EXPECT_EMBER_ERROR(pad(x, {1, 1}, "reflect", 2), "pad: padding mode 'reflect' doesn't take a value");
  EXPECT_EMBER_ERROR(pad(zeros({0}), {1, 1}, "replicate"), "pad: replicate padding (1, 1)", "non-empty");
  EXPECT_EMBER_ERROR(x.repeat({2}), "repeat: number of repeat dims (1) can not be smaller", "(2)");
  EXPECT_EMBER_ERROR(x.repeat({2, -1}), "repeat: repeats can not be negative");
  EXPECT_EMBER_ERROR(tril(zeros({3})), "tril: input tensor must have at least 2 dimensions", "[3]");
  EXPECT_EMBER_ERROR(triu(zeros({})), "triu: input tensor must have at least 2 dimensions");
}

}  // namespace
}  // namespace ember::testing
