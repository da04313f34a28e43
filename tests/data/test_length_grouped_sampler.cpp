#include <gtest/gtest.h>

#include <algorithm>

#include "ember/data/dataset.h"
#include "ember/data/length_grouped_sampler.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(LengthGroupedSampler, MegaBatchesSortedLongestFirst) {
  std::vector<int64_t> lengths(103);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<int64_t>((i * 37) % 101);
  lengths[57] = 500;  // the longest sample
  data::LengthGroupedSampler s(lengths, /*batch_size=*/4, /*seed=*/3, /*mega_batch_mult=*/5);
  std::vector<int64_t> order = s.indices();
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(sorted[i], i);  // a permutation
  EXPECT_EQ(order[0], 57);
  for (size_t start = 0; start < order.size(); start += 20)
    for (size_t k = start + 1; k < std::min(order.size(), start + 20); ++k)
      EXPECT_GE(lengths[order[k - 1]], lengths[order[k]]) << "mega-batch at " << start;
  EXPECT_EQ(s.indices(), order);  // a function of (seed, epoch)
  s.set_epoch(1);
  EXPECT_NE(s.indices(), order);
  EXPECT_EMBER_ERROR(data::LengthGroupedSampler(lengths, 0), "batch_size (0)");
}

TEST(StratifiedSplit, KeepsEachClassShare) {
  std::vector<int64_t> labels;
  for (int i = 0; i < 1000; ++i) labels.push_back(i % 10 < 6 ? 0 : (i % 10 < 9 ? 1 : 2));  // 600/300/100
  auto [train, test] = data::stratified_split(labels, 0.1, 7);
  EXPECT_EQ(train.size(), 900u);
  EXPECT_EQ(test.size(), 100u);
  int count[3] = {0, 0, 0};
  for (int64_t i : test) ++count[labels[i]];
  EXPECT_EQ(count[0], 60);
  EXPECT_EQ(count[1], 30);
  EXPECT_EQ(count[2], 10);
  std::vector<int64_t> all = train;
  all.insert(all.end(), test.begin(), test.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(all[i], i);
  EXPECT_EQ(data::stratified_split(labels, 0.1, 7).second, test);
  EXPECT_NE(data::stratified_split(labels, 0.1, 8).second, test);
  EXPECT_EMBER_ERROR(data::stratified_split(labels, 1.5), "test_fraction must be in [0, 1]");
}

}  // namespace
}  // namespace ember::testing
