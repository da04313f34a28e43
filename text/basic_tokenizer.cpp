#include "ember/text/basic_tokenizer.h"

#include "ember/text/unicode.h"
#include "ember/text/utf8.h"

namespace ember::text {

namespace {

// Hugging Face's _is_whitespace: \t, \n and \r count as whitespace, though they are Cc.
bool is_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || general_category(c) == "Zs";
}

// Hugging Face's _is_control: any category C* (Cc, Cf, Cn, Co, Cs) but \t, \n and \r.
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return general_category(c)[0] == 'C';
}

// Hugging Face's _is_punctuation: all non-alphanumeric printable ASCII ("^", "$", "`" are not
// Unicode punctuation), and category P*.
bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  return general_category(c)[0] == 'P';
}

// Hugging Face's _is_chinese_char: the CJK Unified Ideographs blocks (not Hangul, Hiragana or
// Katakana, whose words are space-separated).
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// _clean_text and _tokenize_chinese_chars in one pass.
std::u32string clean(std::u32string_view text, bool tokenize_chinese_chars) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c == 0 || c == kReplacementChar || is_control(c)) continue;
    if (is_whitespace(c)) {
      out.push_back(' ');
    } else if (tokenize_chinese_chars && is_chinese_char(c)) {
      out.push_back(' ');
      out.push_back(c);
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::u32string strip_accents(std::u32string_view word) {
  std::u32string out;
  for (char32_t c : nfd(word)) {
    if (general_category(c) != "Mn") out.push_back(c);
  }
  return out;
}

// _run_split_on_punc: each punctuation character becomes a word; empty words are dropped (the
// join-and-split that ends Hugging Face's tokenize()).
void split_on_punctuation(const std::u32string& word, std::vector<std::u32string>& out) {
  std::u32string current;
  for (char32_t c : word) {
    if (is_punctuation(c)) {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
      out.emplace_back(1, c);
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
}

}  // namespace

std::vector<std::u32string> split_whitespace(std::u32string_view text) {
  std::vector<std::u32string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

BasicTokenizer::BasicTokenizer(BasicTokenizerOptions options)
    : options_(std::move(options)), never_split_(options_.never_split.begin(), options_.never_split.end()) {}

std::vector<std::u32string> BasicTokenizer::tokenize(std::u32string_view text) const {
  std::vector<std::u32string> out;
  for (std::u32string& word : split_whitespace(nfc(clean(text, options_.tokenize_chinese_chars)))) {
    if (never_split_.count(word)) {
      out.push_back(std::move(word));
      continue;
    }
    if (options_.do_lower_case) word = lower(word);
    if (strip_accents()) word = text::strip_accents(word);
    // Lower-casing and NFD make no whitespace, so the words stay whole.
    split_on_punctuation(word, out);
  }
  return out;
}

}  // namespace ember::text
