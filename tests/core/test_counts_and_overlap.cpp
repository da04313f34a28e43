// Bad input that used to crash or compute garbage: element and byte counts that overflow int64
// (each now an ember::Error naming the op, from shape.h's checked arithmetic), in-place writes
// whose output partly overlaps an input, bernoulli's p outside [0, 1], pad's index map.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::testing {
namespace {

constexpr int64_t k62 = int64_t{1} << 62, k32 = int64_t{1} << 32;

TEST(Counts, OverflowingSizesAreErrorsNotCrashes) {
  EXPECT_EMBER_ERROR(zeros({k62}), "zeros", "overflows int64");
  EXPECT_EMBER_ERROR(zeros({k32, k32}),
                     "zeros: shape [4294967296, 4294967296] has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(linspace(0, 1, int64_t{1} << 61), "overflows int64");
  EXPECT_EMBER_ERROR(nn::Linear(int64_t{1} << 31, int64_t{1} << 31), "overflows int64");
  EXPECT_EMBER_ERROR(empty_strided({2, 2}, {-1, 1}), "empty_strided: negative stride -1");
  EXPECT_EMBER_ERROR(empty_strided({int64_t{1} << 61}, {1}), "empty_strided", "overflows int64");
  EXPECT_EMBER_ERROR(empty_strided({k62, 4}, {4, 1}), "empty_strided: shape",
                     "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(empty_strided({k32, 2}, {k62, 1}), "empty_strided: sizes",
                     "reach past 2^63 - 1 elements");
}

TEST(Counts, ViewsCheckTheirArithmetic) {
  Tensor x = arange(6.0);
  EXPECT_EMBER_ERROR(x.view({-1, k62, k62}), "view: shape", "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(x.reshape({k62, 4}), "reshape: shape", "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(ones({1, 1}).expand({k62, k62}), "expand: shape", "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(ones({2}).repeat({k62}), "repeat: 2 * 4611686018427387904 overflows int64");
  EXPECT_EMBER_ERROR(ones({2}).repeat({k32, k32}), "repeat: shape", "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(x.narrow(0, 2, std::numeric_limits<int64_t>::max()), "narrow: start 2 + length",
                     "exceeds dimension 0 of size 6");
  EXPECT_EMBER_ERROR(x.as_strided({k62, 4}, {4, 1}), "as_strided: shape", "has more than 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(x.as_strided({k32, 2}, {k62, 1}), "as_strided: sizes", "reach past 2^63 - 1 elements");
  EXPECT_EMBER_ERROR(x.as_strided({3}, {2}, std::numeric_limits<int64_t>::max()), "as_strided",
                     "reach outside a storage of 6 elements");
  // What fits still works.
  EXPECT_CLOSE(x.as_strided({3}, {2}, 1), tensor({1.0, 3.0, 5.0}));
  EXPECT_CLOSE(x.narrow(0, 2, 4), tensor({2.0, 3.0, 4.0, 5.0}));
  EXPECT_EQ(ones({1, 1}).expand({k32, k32 / 4}).numel(), k62);
}

TEST(Counts, ConvolutionShapesCheckTheirArithmetic) {
  Tensor x = ones({1, 1, 4, 4}), w = ones({1, 1, 3, 3});
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, {1, 1}, {0, 0}, {k62, 1}), "conv2d", "overflows int64");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, {1, 1}, {k62, 0}), "conv2d", "overflows int64");
  EXPECT_EMBER_ERROR(conv_transpose2d(x, w, {}, {k62, 1}), "conv_transpose2d", "overflows int64");
  EXPECT_EQ(conv2d(x, w, {}, {1, 1}, {1, 1}).sizes(), IntArrayRef({1, 1, 4, 4}));
}

TEST(Overlap, InPlaceOpsRefuseAPartlyOverlappingInput) {
  Tensor x = arange(6.0);
  EXPECT_EMBER_ERROR(x.slice(0, 1).add_(x.slice(0, 0, 5)), "add_",
                     "some elements of the input tensor and the written-to tensor refer to a single memory "
                     "location");
  EXPECT_CLOSE(x, arange(6.0));  // refused before writing
  EXPECT_EMBER_ERROR(x.slice(0, 1).copy_(x.slice(0, 0, 5)), "copy_", "refer to a single memory location");
  Tensor m = arange(9.0).view({3, 3});
  EXPECT_EMBER_ERROR(m.mul_(m.t()), "mul_", "single memory location");
  EXPECT_EMBER_ERROR(m.add_(m[0]), "add_", "single memory location");
  // The same elements in the same layout, or disjoint ones, are fine.
  x.add_(x);
  EXPECT_CLOSE(x, arange(6.0) * 2);
  x.narrow(0, 0, 3).copy_(x.narrow(0, 3, 3));
  EXPECT_CLOSE(x, tensor({6.0, 8.0, 10.0, 6.0, 8.0, 10.0}));
  Tensor y = arange(6.0);
  y.slice(0, 0, 6, 2).sub_(y.slice(0, 1, 6, 2));  // interleaved, not dense: as PyTorch, not compared
  EXPECT_CLOSE(y, tensor({-1.0, 1.0, -1.0, 3.0, -1.0, 5.0}));
}

TEST(Counts, BernoulliAndPadRefuseBadInput) {
  EXPECT_EMBER_ERROR(bernoulli(full({3}, 1.5)), "bernoulli: expects p to be in [0, 1]", "to 1.5");
  EXPECT_EMBER_ERROR(bernoulli(tensor({0.5, -0.1})), "bernoulli: expects p to be in [0, 1]", "-0.1");
  EXPECT_EMBER_ERROR(bernoulli(tensor({0.5, std::nan("")})), "bernoulli: expects p to be in [0, 1]");
  Tensor b = bernoulli(tensor({0.0, 1.0, 1.0}));
  EXPECT_CLOSE(b, tensor({0.0, 1.0, 1.0}));
  EXPECT_EMBER_ERROR(pad(zeros({2}), {k62, 0}), "pad", "overflows int64");
  EXPECT_EMBER_ERROR(pad(zeros({2}), {std::numeric_limits<int64_t>::max(), 1}), "pad", "overflows int64");
  EXPECT_CLOSE(pad(ones({2}), {1, 2}), tensor({0.0, 1.0, 1.0, 0.0, 0.0}));
}

}  // namespace
}  // namespace ember::testing
