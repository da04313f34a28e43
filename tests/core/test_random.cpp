#include "test_util.h"

#include <ember/core/philox.h>
#include <ember/core/random_draw.h>

#include <cmath>

namespace ember::testing {

// Known-answer vectors of Random123's kat_vectors (Salmon et al.): counter, key -> output.
TEST(Philox, MatchesRandom123KnownAnswers) {
  Philox4x32 r = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

// The portable log and sincos behind the normals (core/random_draw.h) against libm, over their
// whole input ranges: a few ulps of double at most.
TEST(Random, DrawMathMatchesLibm) {
  for (int i = 0; i <= 4096; ++i) {
    double u = i / 4096.0 * 0.999999999;
    double s, c;
    random_draw::sincos_2pi(u, s, c);
    EXPECT_NEAR(s, std::sin(2 * M_PI * u), 2e-15) << u;
    EXPECT_NEAR(c, std::cos(2 * M_PI * u), 2e-15) << u;
    for (double x : {1 - u, std::ldexp(1 + u, -1 - i % 53)}) {
      if (x < 0x1p-53 || x > 1) continue;
      EXPECT_NEAR(random_draw::log_unit(x), std::log(x), 1e-15 * std::fabs(std::log(x))) << x;
    }
  }
  double s, c;
  random_draw::sincos_2pi(0.25, s, c);
  EXPECT_EQ(s, 1.0);
  EXPECT_EQ(c, 0.0);
  EXPECT_EQ(random_draw::log_unit(1.0), 0.0);
}

// Normals are Box-Muller on Philox word pairs: element 1 of a float draw is the sine of the
// first pair, its radius and angle from words 0 and 1 of block 0.
TEST(Random, NormalsAreBoxMullerOfThePhiloxWords) {
  Generator g(11);
  Tensor n = randn({4}, kFloat64, &g);
  Philox4x32 r = philox_block(11, 0, 0);
  double u1 = uniform_double(r.v[0], r.v[1]), u2 = uniform_double(r.v[2], r.v[3]);
  double radius = std::sqrt(-2 * std::log(1 - u1));
  EXPECT_NEAR(n[0].item<double>(), radius * std::cos(2 * M_PI * u2), 1e-14);
  EXPECT_NEAR(n[1].item<double>(), radius * std::sin(2 * M_PI * u2), 1e-14);
  Tensor f = randn({2}, kFloat32, &g);
  r = philox_block(11, 1, 0);
  double fr = std::sqrt(-2 * std::log(1.0 - uniform_float(r.v[0])));
  EXPECT_NEAR(f[1].item<float>(), fr * std::sin(2 * M_PI * uniform_float(r.v[1])), 2e-6);
}

// A float Bernoulli draw compares integers: x >> 8 < bernoulli_threshold(p) exactly where
// uniform_float(x) < p, at the ends of [0, 1], on the 2^-24 grid and between its points.
TEST(Random, BernoulliThresholdIsTheFloatCompare) {
  const double grid = 0x1p-24;
  for (double p : {-0.5, 0.0, grid / 2, grid, 1.5 * grid, 0.1, 0.5, 0.9, 1 - grid, 1 - grid / 2, 1.0, 2.0}) {
    const uint32_t t = random_draw::bernoulli_threshold(p);
    for (uint32_t k :
         {0u, 1u, 2u, 1677721u, 1677722u, 8388607u, 8388608u, 15099494u, 15099495u, 16777214u, 16777215u}) {
      const uint32_t x = k << 8 | 0xabu;  // the low 8 bits never count
      EXPECT_EQ((x >> 8) < t, static_cast<double>(uniform_float(x)) < p) << "p " << p << " k " << k;
    }
  }
  EXPECT_EQ(random_draw::bernoulli_threshold(0.0), 0u);
  EXPECT_EQ(random_draw::bernoulli_threshold(1.0), 1u << 24);
  EXPECT_EQ(random_draw::bernoulli_threshold(0.5), 1u << 23);
  EXPECT_EQ(random_draw::bernoulli_threshold(0.5 + grid / 2), (1u << 23) + 1);  // k = 2^23 is below it
}

TEST(Random, SeedGivesTheSameNumbers) {
  manual_seed(42);
  Tensor a = randn({100});
  Tensor b = rand({7, 3}, kFloat64);
  manual_seed(42);
  EXPECT_CLOSE(randn({100}), a, Tolerance{0, 0});
  EXPECT_CLOSE(rand({7, 3}, kFloat64), b, Tolerance{0, 0});
  manual_seed(43);
  EXPECT_FALSE(assert_close(randn({100}), a));
}

TEST(Random, ElementDependsOnlyOnSeedOffsetAndIndex) {
  // A prefix of a longer draw equals a shorter draw with the same state.
  Generator g1(7), g2(7);
  Tensor longer = rand({1000}, {}, &g1);
  Tensor shorter = rand({10}, {}, &g2);
  EXPECT_CLOSE(longer.slice(0, 0, 10), shorter, Tolerance{0, 0});
  // The first element is word 0 of Philox block 0 under (seed 7, offset 0).
  float expected = uniform_float(philox_block(7, 0, 0).v[0]);
  EXPECT_EQ(shorter[0].item<float>(), expected);
}

TEST(Random, DistributionsHaveTheRightMoments) {
  Generator g(123);
  Tensor u = rand({200000}, kFloat64, &g);
  double mean = 0, sq = 0;
  const double* p = u.data_ptr<double>();
  for (int64_t i = 0; i < u.numel(); ++i) mean += p[i], sq += p[i] * p[i];
  mean /= u.numel();
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(sq / u.numel() - mean * mean, 1.0 / 12, 0.002);
  Tensor n = randn({200000}, {}, &g);
  const float* q = n.data_ptr<float>();
  double m = 0, v = 0;
  for (int64_t i = 0; i < n.numel(); ++i) m += q[i];
  m /= n.numel();
  for (int64_t i = 0; i < n.numel(); ++i) v += (q[i] - m) * (q[i] - m);
  EXPECT_NEAR(m, 0, 0.01);
  EXPECT_NEAR(v / n.numel(), 1, 0.02);
  Tensor k = randint(3, 7, {10000}, kInt64, &g);
  const int64_t* kp = k.data_ptr<int64_t>();
  int counts[4] = {};
  for (int64_t i = 0; i < k.numel(); ++i) {
    ASSERT_GE(kp[i], 3);
    ASSERT_LT(kp[i], 7);
    ++counts[kp[i] - 3];
  }
  for (int c : counts) EXPECT_NEAR(c, 2500, 200);
  Tensor bern = bernoulli(zeros({10000}), 0.25, &g);
  double ones_frac = 0;
  for (int64_t i = 0; i < bern.numel(); ++i) ones_frac += bern.data_ptr<float>()[i];
  EXPECT_NEAR(ones_frac / bern.numel(), 0.25, 0.02);
}

TEST(Random, FillsNonContiguousAndLowPrecisionTensors) {
  Tensor base = zeros({4, 6});
  normal_(base.t(), 3, 0.5);
  for (int64_t i = 0; i < 24; ++i) EXPECT_NE(base.data_ptr<float>()[i], 0.0f);
  Tensor h = rand({64}, kBFloat16);
  ASSERT_EQ(h.dtype(), kBFloat16);
  for (int64_t i = 0; i < 64; ++i) {
    float v = h.data_ptr<BFloat16>()[i];
    EXPECT_TRUE(v >= 0 && v <= 1) << v;
  }
  Tensor perm = randperm(10);
  std::vector<int> seen(10);
  for (int64_t i = 0; i < 10; ++i) ++seen.at(static_cast<size_t>(perm.data_ptr<int64_t>()[i]));
  for (int c : seen) EXPECT_EQ(c, 1);
}

TEST(Random, RejectsBadArguments) {
  EXPECT_EMBER_ERROR(randint(5, 5, {3}), "randint", "low < high");
  EXPECT_EMBER_ERROR(normal_(zeros({2}), 0, -1), "normal_", "std");
  EXPECT_EMBER_ERROR(uniform_(zeros({2}, kInt64)), "uniform_", "floating point");
  EXPECT_EMBER_ERROR(bernoulli_(zeros({2}), 1.5), "bernoulli_", "p");
  EXPECT_EMBER_ERROR(uniform_(zeros({3}).expand({2, 3})), "uniform_", "memory location");
}

}  // namespace ember::testing
