// multinomial (core/ops/multinomial.h): frequencies against the weights, zero weights never drawn,
// distinct indices without replacement, shapes, seeding and PyTorch's errors.
#include <cmath>

#include "test_util.h"

namespace ember::testing {
namespace {

// Counts of each of C categories among the draws.
std::vector<int64_t> counts(const Tensor& draws, int64_t C) {
  std::vector<int64_t> c(static_cast<size_t>(C), 0);
  const Tensor d = draws.contiguous();
  for (int64_t i = 0; i < d.numel(); ++i) ++c[static_cast<size_t>(d.data_ptr<int64_t>()[i])];
  return c;
}

// Each category's count within 5 standard deviations of n * p.
void expect_frequencies(const std::vector<int64_t>& c, const std::vector<double>& w, int64_t n) {
  double total = 0;
  for (double v : w) total += v;
  for (size_t k = 0; k < w.size(); ++k) {
    const double p = w[k] / total, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(c[k]), static_cast<double>(n) * p, 5 * sd + 1e-9) << "category " << k;
  }
}

TEST(Multinomial, WithReplacementFollowsTheWeights) {
  manual_seed(3);
  const std::vector<double> w = {1, 0, 3, 6};
  Tensor draws = multinomial(tensor({1.0f, 0.0f, 3.0f, 6.0f}), 100000, true);
  EXPECT_EQ(draws.dtype(), kInt64);
  EXPECT_TRUE(draws.sizes().equals({100000}));
  std::vector<int64_t> c = counts(draws, 4);
  EXPECT_EQ(c[1], 0);
  expect_frequencies(c, w, 100000);
  // Rows draw independently, each from its own weights (float64 too).
  Tensor rows = multinomial(tensor({{0.0, 1.0}, {1.0, 0.0}}), 50, true);
  EXPECT_TRUE(rows.sizes().equals({2, 50}));
  EXPECT_TRUE((rows.select(0, 0) == 1).all().item<bool>());
  EXPECT_TRUE((rows.select(0, 1) == 0).all().item<bool>());
}

TEST(Multinomial, WithoutReplacementDrawsDistinctIndicesAndNeverAZeroWeight) {
  manual_seed(4);
  Tensor perm = multinomial(rand({64, 10}) + 0.1, 10);
  EXPECT_TRUE(std::get<0>(sort(perm, 1)).equal(arange(10, kInt64).expand({64, 10})));
  Tensor w = tensor({2.0f, 0.0f, 1.0f, 0.0f, 1.0f});
  for (int i = 0; i < 20; ++i) {
    std::vector<int64_t> c = counts(multinomial(w, 3), 5);
    EXPECT_EQ(c[1] + c[3], 0);
    EXPECT_EQ(c[0] + c[2] + c[4], 3);
  }
  // The first index drawn follows the weights.
  const std::vector<double> weights = {1, 2, 3, 4};
  Tensor first = multinomial(tensor({1.0f, 2.0f, 3.0f, 4.0f}).expand({40000, 4}), 2).select(1, 0);
  expect_frequencies(counts(first, 4), weights, 40000);
}

TEST(Multinomial, IsSeededByItsGenerator) {
  Generator a(7), b(7);
  Tensor w = rand({3, 100});
  EXPECT_TRUE(multinomial(w, 20, false, &a).equal(multinomial(w, 20, false, &b)));
  EXPECT_TRUE(multinomial(w, 20, true, &a).equal(multinomial(w, 20, true, &b)));
}

TEST(Multinomial, BadInputIsAClearError) {
  EXPECT_EMBER_ERROR(multinomial(tensor({1.0f, -1.0f}), 1), "multinomial: probability tensor contains");
  EXPECT_EMBER_ERROR(multinomial(tensor({1.0f, NAN}), 1, true), "multinomial: probability tensor contains");
  EXPECT_EMBER_ERROR(multinomial(tensor({{1.0f, 1.0f}, {0.0f, 0.0f}}), 1), "sum of probabilities <= 0");
  EXPECT_EMBER_ERROR(multinomial(tensor({1.0f, 0.0f, 1.0f}), 3), "not enough categories");
  EXPECT_EMBER_ERROR(multinomial(ones({2}), 3), "cannot sample n_sample > prob_dist.size(-1)", "(3 > 2)");
  EXPECT_EMBER_ERROR(multinomial(ones({2}), 0), "cannot sample n_sample <= 0");
  EXPECT_EMBER_ERROR(multinomial(ones({2, 2, 2}), 1), "prob_dist must be 1 or 2 dim");
  EXPECT_EMBER_ERROR(multinomial(ones({2}, kInt64), 1), "expected a floating point probability tensor");
  EXPECT_EMBER_ERROR(multinomial(Tensor(), 1), "multinomial: the probability tensor is undefined");
}

}  // namespace
}  // namespace ember::testing
