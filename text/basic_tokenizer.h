#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ember::text {

struct BasicTokenizerOptions {
  bool do_lower_case = true;
  // Strip accents (NFD, then drop category Mn); nullopt follows do_lower_case, as in BERT.
  std::optional<bool> strip_accents;
  bool tokenize_chinese_chars = true;
  // Words kept whole: neither lower-cased nor split at punctuation (the special tokens).
  std::vector<std::u32string> never_split;
};

// Hugging Face's BasicTokenizer (transformers/models/bert/tokenization_bert.py), rule for rule:
// drop U+0000, U+FFFD and control characters, whitespace to ' ', spaces around CJK ideographs,
// NFC, split at whitespace, lower-case and strip accents, split off each punctuation character.
// Needs utf8proc (text/unicode.h).
class BasicTokenizer {
 public:
  explicit BasicTokenizer(BasicTokenizerOptions options);

  // The words of `text`, none empty, none holding whitespace.
  std::vector<std::u32string> tokenize(std::u32string_view text) const;

 private:
  bool strip_accents() const { return options_.strip_accents.value_or(options_.do_lower_case); }

  BasicTokenizerOptions options_;
  std::set<std::u32string, std::less<>> never_split_;
};

// Python's str.split(): the runs between is_space() characters.
std::vector<std::u32string> split_whitespace(std::u32string_view text);

}  // namespace ember::text
