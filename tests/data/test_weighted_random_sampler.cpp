// WeightedRandomSampler: frequencies proportional to the weights with replacement, distinct
// indices without, zero weights never drawn, (seed, epoch) determinism, a DataLoader over it, and
// its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "ember/data/dataloader.h"
#include "ember/data/dataset.h"
#include "ember/data/sampler.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(WeightedRandomSampler, FrequenciesFollowTheWeights) {
  const std::vector<double> w{1, 0, 3, 6};
  data::WeightedRandomSampler s(w, 100000, /*replacement=*/true, /*seed=*/5);
  std::vector<int64_t> idx = s.indices();
  ASSERT_EQ(static_cast<int64_t>(idx.size()), s.size());
  std::vector<double> count(4);
  for (int64_t i : idx) ++count.at(static_cast<size_t>(i));
  EXPECT_EQ(count[1], 0);  // a zero weight never comes up
  // Each share within 5 standard deviations of its expectation (p (1 - p) / n).
  for (size_t i : {0u, 2u, 3u}) {
    const double p = w[i] / 10, sd = std::sqrt(p * (1 - p) / 100000);
    EXPECT_NEAR(count[i] / 100000, p, 5 * sd) << "index " << i;
  }
  EXPECT_EQ(s.indices(), idx);  // a function of (seed, epoch)
  s.set_epoch(1);
  EXPECT_NE(s.indices(), idx);
  EXPECT_NE(data::WeightedRandomSampler(w, 100000, true, 6).indices(), idx);
}

TEST(WeightedRandomSampler, WithoutReplacementDrawsDistinctPositiveIndices) {
  const std::vector<double> w{0.5, 0, 2, 1, 0, 4};
  data::WeightedRandomSampler all(w, 4, /*replacement=*/false);
  std::vector<int64_t> idx = all.indices();
  EXPECT_EQ(std::set<int64_t>(idx.begin(), idx.end()), (std::set<int64_t>{0, 2, 3, 5}));
  // The heaviest index comes first most often: P(first = 5) = 4 / 7.5.
  int first5 = 0;
  data::WeightedRandomSampler one(w, 1, false, 9);
  for (int64_t e = 0; e < 4000; ++e) {
    one.set_epoch(e);
    first5 += one.indices()[0] == 5;
  }
  const double p = 4 / 7.5, sd = std::sqrt(p * (1 - p) / 4000);
  EXPECT_NEAR(first5 / 4000.0, p, 5 * sd);
}

TEST(WeightedRandomSampler, FeedsADataLoader) {
  auto d = std::make_shared<data::TensorDataset>(arange(4));
  auto s = std::make_shared<data::WeightedRandomSampler>(std::vector<double>{0, 0, 1, 0}, 6);
  data::DataLoader loader(d, data::DataLoaderOptions().batch_size(3), s);
  int64_t batches = 0;
  for (auto& batch : loader) {
    EXPECT_TRUE(batch[0].eq(2).all().item<bool>());
    ++batches;
  }
  EXPECT_EQ(batches, 2);
}

TEST(WeightedRandomSampler, RejectsBadWeights) {
  using S = data::WeightedRandomSampler;
  EXPECT_EMBER_ERROR(S({1, -1}, 2), "WeightedRandomSampler", "non-negative", "index 1");
  EXPECT_EMBER_ERROR(S({1, NAN}, 2), "WeightedRandomSampler", "finite");
  EXPECT_EMBER_ERROR(S({0, 0}, 2), "WeightedRandomSampler", "sum to 0");
  EXPECT_EMBER_ERROR(S({}, 2), "WeightedRandomSampler", "sum to 0");
  EXPECT_EMBER_ERROR(S({1, 2}, 0), "WeightedRandomSampler", "num_samples");
  EXPECT_EMBER_ERROR(S({1, 0, 2}, 3, false), "WeightedRandomSampler", "without replacement", "2 positive");
  EXPECT_EMBER_ERROR(S({1e308, 1e308}, 1), "WeightedRandomSampler", "overflows");
}

}  // namespace
}  // namespace ember::testing
