// Bad vocabularies, configs and options give an ember::Error that names the file, line or key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "ember/text/bert_tokenizer.h"
#include "ember/text/unicode.h"
#include "test_util.h"
#include "text/golden_files.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

// The message of the ember::Error that f throws ("" and a failure when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ember::Error";
  return "";
}

class TextErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("ember_text_" + std::to_string(::getpid()) + "_" + test);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  fs::path dir_;
};

const std::string kSpecials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";

TEST_F(TextErrors, VocabFileProblemsNameFileAndLine) {
  const std::string missing = (dir_ / "nope.txt").string();
  EXPECT_NE(error_of([&] { text::Vocab::from_file(missing); }).find("Vocab: cannot open " + missing),
            std::string::npos);
  const std::string dup = write("dup.txt", kSpecials + "hello\nworld\nhello\n");
  EXPECT_EQ(error_of([&] { text::Vocab::from_file(dup); }),
            "Vocab: " + dup + ":8: token 'hello' repeats line 6");
  const std::string bad = write("bad.txt", kSpecials +
                                               "ok\nca\xFF"
                                               "fe\n");
  EXPECT_EQ(error_of([&] { text::Vocab::from_file(bad); }), "Vocab: " + bad + ":7: invalid UTF-8");
  const text::Vocab v = text::Vocab::from_file(write("ok.txt", kSpecials + "\nlast"));  // "" is a token
  EXPECT_EQ(v.size(), 7);
  EXPECT_EQ(v.find(""), 5);
  EXPECT_EQ(v.find("last"), 6);
  EXPECT_NE(error_of([&] { v.token(7); }).find("id 7 out of range [0, 7)"), std::string::npos);
}

TEST_F(TextErrors, VocabWithoutSpecialTokenNamesIt) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember built without utf8proc";
  const std::string no_unk = write("vocab.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  EXPECT_EQ(error_of([&] { text::BertTokenizer(text::Vocab::from_file(no_unk)); }),
            "BertTokenizer: " + no_unk + " has no unk_token '[UNK]'");
  const std::string no_mask = write("vocab2.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
  EXPECT_EQ(error_of([&] { text::BertTokenizer(text::Vocab::from_file(no_mask)); }),
            "BertTokenizer: " + no_mask + " has no mask_token '[MASK]'");
  EXPECT_EQ(error_of([] { text::WordpieceTokenizer(text::Vocab({"a"}, "list"), "[UNK]"); }),
            "WordpieceTokenizer: list has no unknown token '[UNK]'");
}

TEST_F(TextErrors, TokenizerConfigProblemsNameFileAndKey) {
  const std::string good = write("good.json", R"({"do_lower_case": false, "strip_accents": null,
      "model_max_length": 1000000000000000019884624838656, "unk_token": {"content": "<unk>", "lstrip": false},
      "never_split": ["Foo"], "tokenizer_class": "BertTokenizer"})");
  if (!text::has_nlohmann_json()) {
    EXPECT_NE(error_of([&] { text::read_tokenizer_config(good); }).find("built without nlohmann-json"),
              std::string::npos);
    return;
  }
  const text::TokenizerConfig c = text::read_tokenizer_config(good);
  EXPECT_FALSE(c.do_lower_case);
  EXPECT_FALSE(c.strip_accents.has_value());
  EXPECT_EQ(c.model_max_length, std::numeric_limits<int64_t>::max());  // Hugging Face's "no limit"
  EXPECT_EQ(c.unk_token, "<unk>");
  EXPECT_EQ(c.sep_token, "[SEP]");
  EXPECT_EQ(c.never_split, std::vector<std::string>{"Foo"});
  EXPECT_EQ(text::read_tokenizer_config(text_fixture("tokenizer_config.json")).model_max_length, 512);

  const std::string missing = (dir_ / "none.json").string();
  EXPECT_NE(error_of([&] { text::read_tokenizer_config(missing); }).find("cannot open " + missing),
            std::string::npos);
  const std::string broken = write("broken.json", "{\n  \"do_lower_case\": true,\n  oops\n}");
  const std::string msg = error_of([&] { text::read_tokenizer_config(broken); });
  EXPECT_NE(msg.find(broken + " is not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  // Found by tools/fuzz (tokenizer_config): nlohmann-json throws out_of_range, not parse_error.
  const std::string huge = write("huge.json", R"({"model_max_length": 1e999})");
  EXPECT_NE(error_of([&] { text::read_tokenizer_config(huge); }).find(huge + " is not valid JSON: "),
            std::string::npos);
  const std::string typed = write("typed.json", R"({"do_lower_case": "yes"})");
  EXPECT_EQ(error_of([&] { text::read_tokenizer_config(typed); }),
            "read_tokenizer_config: " + typed + ": key \"do_lower_case\" must be a boolean, got \"yes\"");
  const std::string negative = write("neg.json", R"({"model_max_length": -5})");
  EXPECT_NE(error_of([&] {
              text::read_tokenizer_config(negative);
            }).find("\"model_max_length\" must be a positive integer"),
            std::string::npos);
  const std::string list = write("list.json", "[1, 2]");
  EXPECT_NE(error_of([&] { text::read_tokenizer_config(list); }).find("must hold a JSON object, got array"),
            std::string::npos);
  const std::string no_basic = write("nobasic.json", R"({"do_basic_tokenize": false})");
  EXPECT_NE(error_of([&] { text::read_tokenizer_config(no_basic); }).find("do_basic_tokenize"),
            std::string::npos);
}

TEST_F(TextErrors, EncodeOptionsAreChecked) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember built without utf8proc";
  const text::BertTokenizer& t = minilm_tokenizer();
  text::EncodeOptions o;
  o.truncation = true;
  o.max_length = 2;
  EXPECT_EQ(error_of([&] { t.encode("a", "b", o); }),
            "BertTokenizer: max_length 2 leaves no room for the 3 special tokens");
  o.max_length = 0;
  EXPECT_EQ(error_of([&] { t.encode("a", o); }), "BertTokenizer: max_length must be positive, got 0");
  EXPECT_EQ(
      error_of([&] {
        t.encode_batch({"a", "b c"});
      }),
      "BertTokenizer: batch rows have different lengths (row 0: 3, longest: 4); pass padding kLongest, or "
      "truncation");
  EXPECT_EQ(error_of([&] {
              t.encode_batch({"a", "b"}, std::vector<std::string>{"c"});
            }),
            "BertTokenizer: encode_batch got 2 texts and 1 pairs");
  text::TokenizerConfig unlimited;
  unlimited.model_max_length = std::numeric_limits<int64_t>::max();
  const text::BertTokenizer u(text::Vocab::from_file(text_fixture("vocab.txt")), unlimited);
  text::EncodeOptions pad;
  pad.padding = text::Padding::kMaxLength;
  EXPECT_NE(
      error_of([&] { u.encode("a", pad); }).find("padding to max_length needs EncodeOptions::max_length"),
      std::string::npos);
}

}  // namespace
}  // namespace ember::testing
