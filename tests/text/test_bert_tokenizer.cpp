// BertTokenizer's rules one at a time on a small hand-made vocabulary, where each expected id
// can be read off the list below.
#include <gtest/gtest.h>

#include "ember/text/bert_tokenizer.h"
#include "ember/text/unicode.h"
#include "ember/text/utf8.h"

namespace ember::testing {
namespace {

using text::BertTokenizer;
using text::EncodeOptions;
using text::Padding;
using Ids = std::vector<int64_t>;

// id:                      0       1        2        3        4         5     6        7       8
const std::vector<std::string> kTokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff",
                                          "##able", "hello",
                                          // 9   10    11     12     13       14    15     16    17    18
                                          ",", "!", "cafe", "café", "world", "中", "##s", "a", "##b", "ς",
                                          // 19  20    21     22
                                          "σ", "'", "##é", "##ς"};

class BertTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!text::has_utf8proc()) GTEST_SKIP() << "ember built without utf8proc";
  }
  static BertTokenizer make(text::TokenizerConfig config = {}) {
    return BertTokenizer(text::Vocab(kTokens), config);
  }
};

TEST(BertTokenizerBuild, ConstructorNeedsUtf8proc) {
  if (text::has_utf8proc()) {
    EXPECT_EQ(BertTokenizer(text::Vocab(kTokens)).vocab().size(), 23);
  } else {
    EXPECT_THROW(
        {
          try {
            BertTokenizer(text::Vocab(kTokens));
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("ember built without utf8proc"), std::string::npos)
                << e.what();
            throw;
          }
        },
        Error);
  }
}

TEST_F(BertTokenizerTest, WordPieceIsGreedyLongestMatchFirst) {
  const BertTokenizer t = make();
  EXPECT_EQ(t.tokenize("unaffable"), (std::vector<std::string>{"un", "##aff", "##able"}));
  EXPECT_EQ(t.token_ids("Hello, WORLD!"), (Ids{8, 9, 13, 10}));
  EXPECT_EQ(t.token_ids("unaffablex"), (Ids{1}));  // one unmatched piece makes the whole word [UNK]
  EXPECT_EQ(t.token_ids("ab abb"), (Ids{16, 17, 16, 17, 17}));
}

TEST_F(BertTokenizerTest, WordsOverHundredCharactersAreUnknown) {
  const BertTokenizer t = make();
  Ids expected{16};  // "a", then 99 "##b"
  expected.insert(expected.end(), 99, 17);
  EXPECT_EQ(t.token_ids("a" + std::string(99, 'b')), expected);
  EXPECT_EQ(t.token_ids("a" + std::string(100, 'b')), (Ids{1}));
  // Characters, not bytes: 100 characters in 101 bytes are still split.
  text::TokenizerConfig keep;
  keep.strip_accents = false;
  expected.back() = 21;
  EXPECT_EQ(make(keep).token_ids("a" + std::string(98, 'b') + "é"), expected);
}

TEST_F(BertTokenizerTest, LowerCaseStripsAccentsUnlessTold) {
  EXPECT_EQ(make().token_ids("CAFÉ Café"), (Ids{11, 11}));
  EXPECT_EQ(make().token_ids("cafe\xCC\x81"), (Ids{11}));  // e + combining acute
  text::TokenizerConfig keep;
  keep.strip_accents = false;
  EXPECT_EQ(make(keep).token_ids("CAFÉ cafe\xCC\x81"), (Ids{12, 12}));  // NFC composes the second
  text::TokenizerConfig cased;
  cased.do_lower_case = false;
  EXPECT_EQ(make(cased).token_ids("café Hello"), (Ids{12, 1}));  // strip_accents follows do_lower_case
  cased.strip_accents = true;
  EXPECT_EQ(make(cased).token_ids("café"), (Ids{11}));
}

TEST_F(BertTokenizerTest, FinalSigmaAsPythonLower) {
  // "ΣΣ" lower-cases to "σς", "Σ" alone to "σ" (no cased letter before it).
  EXPECT_EQ(make().tokenize("\xCE\xA3\xCE\xA3 \xCE\xA3"), (std::vector<std::string>{"σ", "##ς", "σ"}));
  EXPECT_EQ(text::encode_utf8(text::lower(U"\u03A3\u03A3 \u03A3")), "σς σ");
}

TEST_F(BertTokenizerTest, ChineseCharactersAndPunctuationAreWords) {
  EXPECT_EQ(make().token_ids("hello中中world"), (Ids{8, 14, 14, 13}));
  EXPECT_EQ(make().token_ids("hello$^`world"), (Ids{8, 1, 1, 1, 13}));  // ASCII symbols count as punctuation
  EXPECT_EQ(make().token_ids("a'b"), (Ids{16, 20, 1}));
  text::TokenizerConfig no_cjk;
  no_cjk.tokenize_chinese_chars = false;
  EXPECT_EQ(make(no_cjk).token_ids("hello中"), (Ids{1}));
}

TEST_F(BertTokenizerTest, CleaningDropsControlsAndSplitsAtWhitespace) {
  const BertTokenizer t = make();
  EXPECT_EQ(t.token_ids(std::string("hel\0lo", 6)), (Ids{8}));
  EXPECT_EQ(t.token_ids("hel\x01lo\xE2\x80\x8B"), (Ids{8}));  // Cc and Cf (zero-width space)
  EXPECT_EQ(t.token_ids("hello\tworld\r\nhello\xE3\x80\x80world"), (Ids{8, 13, 8, 13}));  // U+3000 is Zs
  EXPECT_EQ(t.token_ids("hello\xE2\x80\xA8world"), (Ids{8, 13}));  // U+2028: str.split() splits there
  EXPECT_TRUE(t.token_ids("").empty());
  EXPECT_TRUE(t.token_ids(" \t\n ").empty());
}

TEST_F(BertTokenizerTest, InvalidUtf8IsReplacedThenDropped) {
  const BertTokenizer t = make();
  EXPECT_EQ(t.token_ids("hel\xFFlo"), (Ids{8}));
  EXPECT_EQ(t.token_ids("hello\xE2\x82"), (Ids{8}));      // cut short at the end
  EXPECT_EQ(t.token_ids("\xC3hello"), (Ids{8}));          // the lead byte alone is replaced: "h" survives
  EXPECT_EQ(t.token_ids("\xED\xA0\x80hello"), (Ids{8}));  // an encoded surrogate
  EXPECT_EQ(text::decode_utf8("a\xF0\x9F\x98"
                              "b\xC3\xA9"),
            (std::u32string{U'a', 0xFFFD, U'b', 0xE9}));
  EXPECT_EQ(text::decode_utf8("\xE0\x80\xAF"), std::u32string(3, 0xFFFD));  // overlong: each byte alone
}

TEST_F(BertTokenizerTest, SpecialTokensInTextStayWhole) {
  const BertTokenizer t = make();
  EXPECT_EQ(t.token_ids("hello [MASK] world"), (Ids{8, 4, 13}));
  EXPECT_EQ(t.token_ids("hello[SEP]world[CLS]"), (Ids{8, 3, 13, 2}));  // split out before punctuation
  EXPECT_EQ(t.token_ids("[mask] [MASK"), Ids(5, 1));  // only the exact token: "[", "mask", "]", "[", "mask"
  EXPECT_EQ(t.cls_token_id(), 2);
  EXPECT_EQ(t.sep_token_id(), 3);
  EXPECT_EQ(t.pad_token_id(), 0);
  EXPECT_EQ(t.unk_token_id(), 1);
  EXPECT_EQ(t.mask_token_id(), 4);
}

TEST_F(BertTokenizerTest, EncodeAddsSpecialTokensAndSegments) {
  const BertTokenizer t = make();
  text::Encoding e = t.encode("hello world", "unaffable");
  EXPECT_EQ(e.input_ids, (Ids{2, 8, 13, 3, 5, 6, 7, 3}));
  EXPECT_EQ(e.token_type_ids, (Ids{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(e.attention_mask, Ids(8, 1));
  EncodeOptions raw;
  raw.add_special_tokens = false;
  EXPECT_EQ(t.encode("hello world", raw).input_ids, (Ids{8, 13}));
}

TEST_F(BertTokenizerTest, TruncationIsLongestFirst) {
  const BertTokenizer t = make();
  EncodeOptions o;
  o.truncation = true;
  o.max_length = 4;
  EXPECT_EQ(t.encode("hello world hello", o).input_ids, (Ids{2, 8, 13, 3}));
  // 5 + 2 tokens into 8 (3 special): 2 removed, both from the longer first sequence.
  o.max_length = 8;
  EXPECT_EQ(t.encode("a a a a a", "hello world", o).input_ids, (Ids{2, 16, 16, 16, 3, 8, 13, 3}));
  // Equal lengths: the odd token comes off the second.
  o.max_length = 6;
  EXPECT_EQ(t.encode("a a", "hello world", o).input_ids, (Ids{2, 16, 16, 3, 8, 3}));
  o.truncation = false;  // max_length alone pads or limits nothing
  EXPECT_EQ(t.encode("a a a a a", o).input_ids.size(), 7u);
}

TEST_F(BertTokenizerTest, ModelMaxLengthIsTheDefaultLimit) {
  text::TokenizerConfig c;
  c.model_max_length = 3;
  EncodeOptions o;
  o.truncation = true;
  EXPECT_EQ(make(c).encode("hello world", o).input_ids, (Ids{2, 8, 3}));
  o.padding = Padding::kMaxLength;
  EXPECT_EQ(make(c).encode("", o).input_ids, (Ids{2, 3, 0}));
}

TEST_F(BertTokenizerTest, BatchPadsAndMasks) {
  const BertTokenizer t = make();
  EncodeOptions o;
  o.padding = Padding::kLongest;
  text::BatchEncoding b = t.encode_batch({"hello world", "a", ""}, o);
  ASSERT_EQ(b.input_ids.sizes().vec(), (Ids{3, 4}));
  ASSERT_EQ(b.attention_mask.dtype(), kInt64);
  const int64_t* ids = b.input_ids.data_ptr<int64_t>();
  const int64_t* mask = b.attention_mask.data_ptr<int64_t>();
  const int64_t* types = b.token_type_ids.data_ptr<int64_t>();
  EXPECT_EQ(Ids(ids, ids + 12), (Ids{2, 8, 13, 3, 2, 16, 3, 0, 2, 3, 0, 0}));
  EXPECT_EQ(Ids(mask, mask + 12), (Ids{1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(Ids(types, types + 12), Ids(12, 0));

  o.padding = Padding::kMaxLength;
  o.max_length = 6;
  b = t.encode_batch({"hello", "a"}, {"world", "ab"}, o);
  ASSERT_EQ(b.input_ids.sizes().vec(), (Ids{2, 6}));
  types = b.token_type_ids.data_ptr<int64_t>();
  mask = b.attention_mask.data_ptr<int64_t>();
  EXPECT_EQ(Ids(types, types + 12), (Ids{0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(Ids(mask, mask + 12), (Ids{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace ember::testing
