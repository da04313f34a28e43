#include <gtest/gtest.h>

#include <memory>

#include "ember/data/masked_lm.h"
#include "ember/data/sequence_dataset.h"
#include "test_util.h"

namespace ember::testing {
namespace {

bool same(const Tensor& a, const Tensor& b) {
  return a.sizes().equals(b.sizes()) && a.eq(b).all().item<bool>();
}

constexpr int64_t kCls = 101, kSep = 102, kPad = 0, kMask = 103, kVocab = 1000;

data::MaskedLMOptions options() {
  data::MaskedLMOptions o;
  o.mask_token_id = kMask;
  o.vocab_size = kVocab;
  o.special_token_ids = {kCls, kSep, kPad};
  return o;
}

// n sequences [CLS] 200 201 ... [SEP] of `length` words.
std::shared_ptr<data::SequenceDataset> corpus(int64_t n, int64_t length) {
  std::vector<std::vector<int64_t>> seqs;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> s{kCls};
    for (int64_t k = 0; k < length; ++k) s.push_back(200 + k);
    s.push_back(kSep);
    seqs.push_back(s);
  }
  return std::make_shared<data::SequenceDataset>(seqs, std::vector<int64_t>(static_cast<size_t>(n), 0));
}

TEST(MaskedLM, ChoosesFifteenPercentAndReplacesEightyTenTen) {
  auto words = corpus(400, 100);
  data::MaskedLMDataset ds(words, options(), /*seed=*/3);
  int64_t chosen = 0, masked = 0, random = 0, kept = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    data::Example e = ds.get(i);
    ASSERT_EQ(e.size(), 3u);
    const Tensor& ids = e[0];
    const auto pos = e[1].data_ptr<int64_t>();
    const auto lab = e[2].data_ptr<int64_t>();
    ASSERT_EQ(e[1].numel(), e[2].numel());
    // The special tokens stay; the labels are the original ids; positions increase.
    EXPECT_EQ(ids.data_ptr<int64_t>()[0], kCls);
    EXPECT_EQ(ids.data_ptr<int64_t>()[101], kSep);
    for (int64_t k = 0; k < e[1].numel(); ++k) {
      ASSERT_GE(pos[k], 1);
      ASSERT_LE(pos[k], 100);
      if (k > 0) {
        ASSERT_GT(pos[k], pos[k - 1]);
      }
      EXPECT_EQ(lab[k], 200 + pos[k] - 1);
      const int64_t now = ids.data_ptr<int64_t>()[pos[k]];
      (now == kMask ? masked : now == lab[k] ? kept : random) += 1;
    }
    chosen += e[1].numel();
    // Positions not chosen keep their ids.
    EXPECT_CLOSE(scatter(ids, 0, e[1], e[2]), words->get(i)[0]);
  }
  // 40,000 candidates: 15% +- 4 standard deviations, then 80/10/10 of those (a random draw can
  // hit the original id, 1 in 1000: counted as kept).
  EXPECT_NEAR(static_cast<double>(chosen) / 40000, 0.15, 0.0072);
  EXPECT_NEAR(static_cast<double>(masked) / chosen, 0.8, 0.02);
  EXPECT_NEAR(static_cast<double>(random) / chosen, 0.1, 0.015);
  EXPECT_NEAR(static_cast<double>(kept) / chosen, 0.1, 0.015);
}

TEST(MaskedLM, DependsOnSeedEpochAndIndexOnly) {
  auto words = corpus(8, 30);
  data::MaskedLMDataset a(words, options(), 1), b(words, options(), 1), c(words, options(), 2);
  EXPECT_CLOSE(a.get(5)[0], b.get(5)[0]);
  EXPECT_CLOSE(a.get(5)[1], b.get(5)[1]);
  EXPECT_CLOSE(a.get(-3)[1], a.get(5)[1]);
  EXPECT_FALSE(same(a.get(5)[0], c.get(5)[0]) && same(a.get(5)[1], c.get(5)[1]));
  EXPECT_FALSE(same(a.get(5)[1], a.get(4)[1]) && same(a.get(5)[0], a.get(4)[0]));
  b.set_epoch(1);
  EXPECT_FALSE(same(a.get(5)[0], b.get(5)[0]) && same(a.get(5)[1], b.get(5)[1]));
  data::MaskedLMDataset copy(b);
  EXPECT_CLOSE(copy.get(5)[1], b.get(5)[1]);
}

TEST(MaskedLM, EverySampleWithWordsPredictsOne) {
  // One word: 15% would leave most samples with nothing to predict.
  auto one = corpus(50, 1);
  data::MaskedLMDataset ds(one, options(), 0);
  for (int64_t i = 0; i < ds.size(); ++i) {
    data::Example e = ds.get(i);
    ASSERT_EQ(e[1].numel(), 1);
    EXPECT_EQ(e[1].item<int64_t>(), 1);
    EXPECT_EQ(e[2].item<int64_t>(), 200);
  }
  // Only special tokens: nothing to predict, nothing changed.
  auto empty = corpus(1, 0);
  data::Example e = data::MaskedLMDataset(empty, options(), 0).get(0);
  EXPECT_EQ(e[1].numel(), 0);
  EXPECT_CLOSE(e[0], empty->get(0)[0]);
}

TEST(MaskedLM, CollateFlattensPositions) {
  std::vector<data::Example> examples{
      {tensor(std::vector<int64_t>{kCls, kMask, 7, kSep}, kInt64), tensor(std::vector<int64_t>{1}, kInt64),
       tensor(std::vector<int64_t>{5}, kInt64)},
      {tensor(std::vector<int64_t>{kCls, kMask, kSep}, kInt64), tensor(std::vector<int64_t>{1}, kInt64),
       tensor(std::vector<int64_t>{9}, kInt64)}};
  data::Example b = data::masked_lm_collate(examples, kPad);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_CLOSE(
      b[0], tensor(std::vector<int64_t>{kCls, kMask, 7, kSep, kCls, kMask, kSep, kPad}, kInt64).view({2, 4}));
  EXPECT_CLOSE(b[1], tensor(std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 0}, kInt64).view({2, 4}));
  EXPECT_CLOSE(b[2], tensor(std::vector<int64_t>{1, 5}, kInt64));  // row 1 starts at 4
  EXPECT_CLOSE(b[3], tensor(std::vector<int64_t>{5, 9}, kInt64));
  // The gathered tokens are the masked ones.
  EXPECT_CLOSE(b[0].flatten().index_select(0, b[2]), full({2}, kMask, TensorOptions(kInt64)));
}

TEST(MaskedLM, Errors) {
  auto words = corpus(2, 3);
  data::MaskedLMOptions o = options();
  o.mask_token_id = kVocab;
  EXPECT_EMBER_ERROR(data::MaskedLMDataset(words, o), "MaskedLMDataset: mask_token_id 1000 is outside");
  o = options();
  o.mlm_probability = 0;
  EXPECT_EMBER_ERROR(data::MaskedLMDataset(words, o), "mlm_probability must be in (0, 1]");
  o = options();
  o.random_replace_prob = 0.5;
  EXPECT_EMBER_ERROR(data::MaskedLMDataset(words, o), "must be non-negative with a sum of at most 1");
  EXPECT_EMBER_ERROR(data::MaskedLMDataset(words, options()).get(2), "MaskedLMDataset");
  EXPECT_EMBER_ERROR(data::masked_lm_collate({{zeros({2}, TensorOptions(kInt64))}}, 0),
                     "masked_lm_collate: example 0 must be (input ids, positions, labels)");
  EXPECT_EMBER_ERROR(data::masked_lm_collate({}, 0), "masked_lm_collate: got no examples");
}

}  // namespace
}  // namespace ember::testing
