// native_dropout and native_dropout_backward on the CPU: the mask follows its Philox definition
// and replays with the generator's state (which moves one offset, as bernoulli_ moves it), the
// values in every float dtype against the where() composite dropout used to be, p = 0 and 1,
// non-contiguous and empty inputs, the backward and its own backward, autocast, and the errors.
#include <cmath>

#include "ember/core/autocast_mode.h"
#include "ember/core/philox.h"
#include "test_util.h"

namespace ember::testing {
namespace {

constexpr ScalarType kFloatDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

Tensor bools(IntArrayRef sizes, bool v) { return full(sizes, v ? 1 : 0, kInt64).ne(0); }

// What dropout computed before it was fused: x * (1 / (1 - p)) where kept, else 0.
Tensor composite(const Tensor& x, const Tensor& mask, double p) { return where(mask, x * (1 / (1 - p)), 0); }

// Element i is kept when the 16-bit half i % 2 of word (i % 8) / 2 of Philox block i / 8 under key
// `seed` and stream `offset` is below ceil((1 - p) 2^16) (core/ops/dropout_functors.h), for sizes
// around the Philox block (8), the kernel's chunk (256) and its thread grain (4096).
TEST(NativeDropout, MaskFollowsThePhiloxDefinition) {
  const uint64_t seed = 0x1234567890ull, offset = 3;
  for (int64_t n : {1, 7, 9, 255, 257, 4097})
    for (double p : {0.1, 0.4, 0.9}) {
      SCOPED_TRACE("n " + std::to_string(n) + " p " + std::to_string(p));
      Generator g(seed);
      g.set_state({seed, offset});
      auto [out, mask] = native_dropout(ones({n}, kFloat64), p, true, &g);
      EXPECT_EQ(g.get_state().offset, offset + 1);  // one offset, as bernoulli_
      const auto threshold = static_cast<uint32_t>(std::ceil((1 - p) * 65536));
      Tensor expected = empty({n}, kBool);
      for (int64_t i = 0; i < n; ++i) {
        Philox4x32 r = philox_block(seed, offset, static_cast<uint64_t>(i / 8));
        expected[i].fill_(((r.v[i % 8 / 2] >> (16 * (i % 2))) & 0xffff) < threshold ? 1 : 0);
      }
      EXPECT_CLOSE(mask, expected);
      EXPECT_CLOSE(out, where(expected, ones({n}, kFloat64) * (1 / (1 - p)), 0), Tolerance{0, 0});
    }
  // The default generator: replaying its state replays the mask.
  manual_seed(77);
  Tensor x = random_tensor({33, 17}, kFloat32);
  PhiloxState s = default_generator().get_state();
  Tensor first = std::get<1>(native_dropout(x, 0.25));
  default_generator().set_state(s);
  EXPECT_CLOSE(std::get<1>(native_dropout(x, 0.25)), first);
}

TEST(NativeDropout, ValuesInEveryDtypeMatchTheComposite) {
  for (ScalarType dt : kFloatDtypes)
    for (double p : {0.3, 0.5, 0.75}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " p " + std::to_string(p));
      Tensor x = random_tensor({37, 29}, dt, -100, 100);
      Generator g(9);
      auto [out, mask] = native_dropout(x, p, true, &g);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(mask.dtype(), kBool);
      EXPECT_CLOSE(out, composite(x, mask, p), Tolerance{0, 0});
      if (p != 0.3) {  // 1 / (1 - p) is a power of 2: the result is exact in any dtype
        EXPECT_CLOSE(out.to(kFloat64), where(mask, x.to(kFloat64) / (1 - p), 0), Tolerance{0, 0});
      }
      // The mask does not depend on the dtype.
      Generator g32(9);
      EXPECT_CLOSE(mask, std::get<1>(native_dropout(x.to(kFloat32), p, true, &g32)));
    }
}

TEST(NativeDropout, ProbabilityOneGivesZerosEvenForInfAndNaN) {
  Tensor x = tensor({1.0, INFINITY, -INFINITY, NAN, 3.0});
  Generator g(1);
  auto [out, mask] = native_dropout(x, 1.0, true, &g);
  EXPECT_CLOSE(out, zeros({5}), Tolerance{0, 0});
  EXPECT_CLOSE(mask, bools({5}, false));
  EXPECT_EQ(g.get_state().offset, 1u);  // the draw still takes its offset, as bernoulli_(mask, 0)
  EXPECT_CLOSE(dropout(x, 1.0, true, &g), zeros({5}), Tolerance{0, 0});
}

TEST(NativeDropout, ProbabilityZeroAndEvalKeepEverythingWithoutDrawing) {
  Tensor x = random_tensor({4, 3}, kFloat32);
  Generator g(1);
  for (auto [p, training] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
    auto [out, mask] = native_dropout(x, p, training, &g);
    EXPECT_FALSE(out.is_same(x));  // a copy, as PyTorch's
    EXPECT_CLOSE(out, x, Tolerance{0, 0});
    EXPECT_CLOSE(mask, bools({4, 3}, true));
  }
  EXPECT_EQ(g.get_state().offset, 0u);
}

TEST(NativeDropout, EmptyInputTakesAnOffsetAsBernoulli) {
  Generator g(1);
  auto [out, mask] = native_dropout(empty({0, 3}), 0.5, true, &g);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(mask.sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(g.get_state().offset, 1u);
}

TEST(NativeDropout, NonContiguousInputGivesTheContiguousResult) {
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor x = random_tensor({13, 21}, dt);
    Generator g1(4), g2(4), g3(4);
    auto [out, mask] = native_dropout(x, 0.4, true, &g1);
    auto [out_nc, mask_nc] = native_dropout(non_contiguous(x), 0.4, true, &g2);
    EXPECT_CLOSE(out_nc, out, Tolerance{0, 0});
    EXPECT_CLOSE(mask_nc, mask);
    // A transposed input is dense: the result keeps its layout (as PyTorch's empty_like), and
    // the draws go in memory order, so element (i, j) draws number j * 21 + i.
    auto [out_t, mask_t] = native_dropout(x.t(), 0.4, true, &g3);
    EXPECT_EQ(out_t.strides().vec(), (std::vector<int64_t>{1, 21}));
    EXPECT_EQ(mask_t.strides().vec(), (std::vector<int64_t>{1, 21}));
    EXPECT_CLOSE(out_t, composite(x.t(), mask_t, 0.4), Tolerance{0, 0});
    EXPECT_CLOSE(mask_t, mask.t());
  }
}

TEST(NativeDropout, KeepsAboutOneMinusPAndIsUnbiased) {
  const int64_t n = 400000;
  for (double p : {0.1, 0.5, 0.8}) {
    Generator g(11);
    auto [out, mask] = native_dropout(ones({n}, kFloat64), p, true, &g);
    // The kept fraction is Binomial(n, 1 - p) / n: standard deviation below 0.0008.
    EXPECT_NEAR(mask.to(kFloat64).mean().item<double>(), 1 - p, 0.004) << p;
    EXPECT_NEAR(out.mean().item<double>(), 1.0, 0.02) << p;  // E[out] = x
  }
}

TEST(NativeDropoutBackward, IsGradTimesMaskTimesScale) {
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor g = random_tensor({6, 7}, dt, -10, 10);
    Tensor mask = random_tensor({6, 7}, kFloat32, 0, 1).lt(0.6);
    EXPECT_CLOSE(native_dropout_backward(g, mask, 2.0).to(kFloat64), where(mask, g.to(kFloat64) * 2, 0),
                 Tolerance{0, 0});
    EXPECT_CLOSE(native_dropout_backward(g, mask, 1 / 0.7), where(mask, g * (1 / 0.7), 0), Tolerance{0, 0});
    // Non-contiguous gradient and mask.
    EXPECT_CLOSE(native_dropout_backward(non_contiguous(g), non_contiguous(mask), 1.25),
                 native_dropout_backward(g, mask, 1.25), Tolerance{0, 0});
    EXPECT_CLOSE(native_dropout_backward(g.t(), mask.t(), 1.25), native_dropout_backward(g, mask, 1.25).t(),
                 Tolerance{0, 0});
  }
  // Dropped elements are 0 whatever the gradient; scale 0 (p == 1) gives zeros.
  Tensor g = tensor({INFINITY, NAN, 2.0, -1.0});
  Tensor mask = tensor({0, 0, 1, 1}, kInt64).ne(0);
  EXPECT_CLOSE(native_dropout_backward(g, mask, 3.0), tensor({0.0, 0.0, 6.0, -3.0}), Tolerance{0, 0});
  EXPECT_CLOSE(native_dropout_backward(g.slice(0, 2), mask.slice(0, 2), 0.0), zeros({2}), Tolerance{0, 0});
  EXPECT_EQ(native_dropout_backward(empty({0}), empty({0}, kBool), 2.0).numel(), 0);
}

TEST(NativeDropout, AutogradRecordsTheBackwardOpAndDifferentiatesAgain) {
  Tensor x = random_tensor({5, 4}, kFloat64).requires_grad_();
  Generator gen(3);
  auto [out, mask] = native_dropout(x, 0.25, true, &gen);
  EXPECT_EQ(out.grad_fn()->name(), "native_dropout");
  EXPECT_FALSE(mask.requires_grad());
  Tensor gy = random_tensor({5, 4}, kFloat64).requires_grad_();
  Tensor gx = autograd::grad({out}, {x}, {gy}, true, true)[0];
  EXPECT_CLOSE(gx, where(mask, gy * (1 / 0.75), 0), Tolerance{0, 0});
  ASSERT_TRUE(gx.requires_grad());
  EXPECT_EQ(gx.grad_fn()->name(), "native_dropout_backward");
  // d(sum(gx * w)) / d gy = mask * w * (1 / (1 - p)).
  Tensor w = random_tensor({5, 4}, kFloat64);
  Tensor ggy = autograd::grad({(gx * w).sum()}, {gy})[0];
  EXPECT_CLOSE(ggy, where(mask, w * (1 / 0.75), 0), Tolerance{0, 0});
}

TEST(NativeDropout, AutocastRunsInTheInputDtype) {
  amp::AutocastGuard guard(kCPU, kBFloat16);
  for (ScalarType dt : {kFloat32, kFloat16, kFloat64}) {
    Tensor x = random_tensor({3, 4}, dt);
    EXPECT_EQ(std::get<0>(native_dropout(x, 0.5)).dtype(), dt);
    EXPECT_EQ(dropout(x, 0.5).dtype(), dt);
    EXPECT_EQ(native_dropout_backward(x, bools({3, 4}, true), 2.0).dtype(), dt);
  }
}

TEST(NativeDropout, Errors) {
  Tensor x = empty({3});
  EXPECT_EMBER_ERROR(native_dropout(x, 1.5), "native_dropout", "between 0 and 1", "1.5");
  EXPECT_EMBER_ERROR(native_dropout(x, -0.1), "native_dropout", "-0.1");
  EXPECT_EMBER_ERROR(native_dropout(empty({2, 3}, kInt64), 0.5), "native_dropout", "floating point", "int64",
                     "[2, 3]");
  EXPECT_EMBER_ERROR(dropout(empty({3}, kBool), 0.5), "dropout", "floating point", "bool", "[3]");
  Tensor mask = bools({2, 3}, true);
  EXPECT_EMBER_ERROR(native_dropout_backward(empty({2, 3}, kInt32), mask, 2), "native_dropout_backward",
                     "floating point grad_output", "int32", "[2, 3]");
  EXPECT_EMBER_ERROR(native_dropout_backward(empty({2, 3}), empty({2, 3}), 2), "native_dropout_backward",
                     "mask should be a bool tensor", "float32", "[2, 3]");
  EXPECT_EMBER_ERROR(native_dropout_backward(empty({3, 2}), mask, 2), "native_dropout_backward",
                     "mask of shape [2, 3]", "grad_output of shape [3, 2]");
}

}  // namespace
}  // namespace ember::testing
