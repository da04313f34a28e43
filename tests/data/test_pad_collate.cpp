#include <gtest/gtest.h>

#include "ember/data/collate.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(PadCollate, PadsToTheLongestAndMasks) {
  std::vector<data::Example> examples{
      {tensor(std::vector<int64_t>{5, 6, 7}, kInt64), full({}, 2, TensorOptions(kInt64))},
      {tensor(std::vector<int64_t>{8}, kInt64), full({}, 0, TensorOptions(kInt64))}};
  data::Example b = data::pad_collate(examples, /*padding_value=*/0);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_CLOSE(b[0], tensor(std::vector<int64_t>{5, 6, 7, 8, 0, 0}, kInt64).view({2, 3}));
  EXPECT_CLOSE(b[1], tensor(std::vector<int64_t>{1, 1, 1, 1, 0, 0}, kInt64).view({2, 3}));
  EXPECT_CLOSE(b[2], tensor(std::vector<int64_t>{2, 0}, kInt64));
  EXPECT_EQ(b[0].dtype(), kInt64);
  // int32 sequences come out as int64, as default_collate's; padding with another id.
  data::Example c = data::pad_collate(
      {{tensor(std::vector<int32_t>{1}, kInt32)}, {tensor(std::vector<int32_t>{2, 3}, kInt32)}}, 9);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].dtype(), kInt64);
  EXPECT_CLOSE(c[0], tensor(std::vector<int64_t>{1, 9, 2, 3}, kInt64).view({2, 2}));
  // pad_to_multiple_of rounds the length up (and leaves a multiple alone).
  data::Example d = data::pad_collate(examples, 0, /*pad_to_multiple_of=*/4);
  EXPECT_CLOSE(d[0], tensor(std::vector<int64_t>{5, 6, 7, 0, 8, 0, 0, 0}, kInt64).view({2, 4}));
  EXPECT_CLOSE(d[1], tensor(std::vector<int64_t>{1, 1, 1, 0, 1, 0, 0, 0}, kInt64).view({2, 4}));
  EXPECT_EQ(data::pad_collate(examples, 0, 3)[0].size(1), 3);
}

TEST(PadCollate, Errors) {
  EXPECT_EMBER_ERROR(data::pad_collate({}, 0), "pad_collate: got no examples");
  EXPECT_EMBER_ERROR(data::pad_collate({{zeros({2, 2}, TensorOptions(kInt64))}}, 0),
                     "field 0 of example 0 must be a 1-D sequence, got [2, 2]");
  EXPECT_EMBER_ERROR(
      data::pad_collate({{zeros({2}, TensorOptions(kInt64))}, {zeros({2}, TensorOptions(kInt32))}}, 0),
      "sequence 1 is");
  EXPECT_EMBER_ERROR(data::pad_collate({{zeros({2}, TensorOptions(kInt64))}}, 0, 0),
                     "pad_collate: pad_to_multiple_of must be positive, got 0");
}

}  // namespace
}  // namespace ember::testing
