#include "ember/text/bert_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "ember/core/error.h"
#include "ember/core/factories.h"
#include "ember/text/unicode.h"
#include "ember/text/utf8.h"

namespace ember::text {

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Refuses a build without utf8proc and a vocabulary that lacks one of the special tokens.
TokenizerConfig checked(const Vocab& vocab, TokenizerConfig c) {
  EMBER_CHECK(has_utf8proc(),
              "BertTokenizer: ember built without utf8proc (install libutf8proc-dev and rebuild)");
  const std::pair<const char*, const std::string*> specials[] = {{"unk_token", &c.unk_token},
                                                                 {"sep_token", &c.sep_token},
                                                                 {"pad_token", &c.pad_token},
                                                                 {"cls_token", &c.cls_token},
                                                                 {"mask_token", &c.mask_token}};
  for (auto [key, token] : specials) {
    EMBER_CHECK(vocab.find(*token), "BertTokenizer: ", vocab.source(), " has no ", key, " '", *token, "'");
  }
  return c;
}

BasicTokenizerOptions basic_options(const TokenizerConfig& c) {
  BasicTokenizerOptions o{c.do_lower_case, c.strip_accents, c.tokenize_chinese_chars, {}};
  for (const std::string* t : {&c.unk_token, &c.sep_token, &c.pad_token, &c.cls_token, &c.mask_token}) {
    o.never_split.push_back(decode_utf8(*t));
  }
  for (const std::string& t : c.never_split) o.never_split.push_back(decode_utf8(t));
  return o;
}

void pad(Encoding& e, int64_t length, int64_t pad_id) {
  const auto n = static_cast<size_t>(length);
  if (e.input_ids.size() >= n) return;
  e.input_ids.resize(n, pad_id);
  e.token_type_ids.resize(n, 0);
  e.attention_mask.resize(n, 0);
}

}  // namespace

BertTokenizer::BertTokenizer(Vocab vocab, TokenizerConfig config)
    : config_(checked(vocab, std::move(config))),
      wordpiece_(std::move(vocab), config_.unk_token),
      basic_(basic_options(config_)),
      never_split_(config_.never_split.begin(), config_.never_split.end()) {
  auto id = [this](const std::string& token) { return *wordpiece_.vocab().find(token); };
  unk_id_ = id(config_.unk_token);
  sep_id_ = id(config_.sep_token);
  pad_id_ = id(config_.pad_token);
  cls_id_ = id(config_.cls_token);
  mask_id_ = id(config_.mask_token);
  for (const std::string* t : {&config_.unk_token, &config_.sep_token, &config_.pad_token, &config_.cls_token,
                               &config_.mask_token}) {
    special_tokens_.push_back({decode_utf8(*t), id(*t)});
  }
  // The longest first, so that a token that starts with another wins (the trie's longest match).
  std::stable_sort(
      special_tokens_.begin(), special_tokens_.end(),
      [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
}

BertTokenizer BertTokenizer::from_pretrained(const std::string& dir) {
  const std::filesystem::path config = std::filesystem::path(dir) / "tokenizer_config.json";
  return BertTokenizer(
      Vocab::from_file((std::filesystem::path(dir) / "vocab.txt").string()),
      std::filesystem::exists(config) ? read_tokenizer_config(config.string()) : TokenizerConfig{});
}

std::vector<int64_t> BertTokenizer::token_ids(std::string_view text) const {
  const std::u32string chars = decode_utf8(text);
  std::vector<int64_t> ids;
  // The text between special tokens goes through BasicTokenizer and WordPiece.
  auto tokenize_span = [&](size_t begin, size_t end) {
    for (const std::u32string& word :
         basic_.tokenize(std::u32string_view(chars).substr(begin, end - begin))) {
      const std::string utf8 = encode_utf8(word);
      if (never_split_.count(utf8)) {
        ids.push_back(vocab().find(utf8).value_or(unk_id_));
      } else {
        wordpiece_.tokenize(utf8, ids);
      }
    }
  };
  size_t begin = 0;
  for (size_t i = 0; i < chars.size();) {
    auto special = std::find_if(special_tokens_.begin(), special_tokens_.end(), [&](const SpecialToken& s) {
      return std::u32string_view(chars).substr(i, s.text.size()) == s.text;
    });
    if (special == special_tokens_.end()) {
      ++i;
      continue;
    }
    tokenize_span(begin, i);
    ids.push_back(special->id);
    i += special->text.size();
    begin = i;
  }
  tokenize_span(begin, chars.size());
  return ids;
}

std::vector<std::string> BertTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> tokens;
  for (int64_t id : token_ids(text)) tokens.push_back(vocab().token(id));
  return tokens;
}

int64_t BertTokenizer::max_length(const EncodeOptions& options) const {
  EMBER_CHECK(!options.max_length || *options.max_length > 0,
              "BertTokenizer: max_length must be positive, got ", *options.max_length);
  return options.max_length.value_or(config_.model_max_length);
}

Encoding BertTokenizer::encode_ids(std::vector<int64_t> a, std::optional<std::vector<int64_t>> b,
                                   const EncodeOptions& options) const {
  const int64_t specials = options.add_special_tokens ? (b ? 3 : 2) : 0;
  const int64_t limit = max_length(options);
  if (options.truncation && limit != kNoLimit) {
    EMBER_CHECK(limit >= specials, "BertTokenizer: max_length ", limit, " leaves no room for the ", specials,
                " special tokens");
    const auto la = static_cast<int64_t>(a.size()), lb = b ? static_cast<int64_t>(b->size()) : 0;
    const int64_t remove = la + lb + specials - limit;
    if (remove > 0 && !b) {
      a.resize(static_cast<size_t>(la - remove));
    } else if (remove > 0) {
      // Hugging Face's truncate_sequences("longest_first"): first even out the lengths, then take
      // the rest half from each, the odd one from the second sequence.
      const int64_t first = std::min(std::abs(la - lb), remove), second = remove - first;
      const int64_t from_a = la > lb ? first + second / 2 : second / 2;
      const int64_t from_b = remove - from_a;
      a.resize(static_cast<size_t>(la - from_a));
      b->resize(static_cast<size_t>(lb - from_b));
    }
  }
  Encoding e;
  if (options.add_special_tokens) e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), a.begin(), a.end());
  if (options.add_special_tokens) e.input_ids.push_back(sep_id_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  if (b) {
    e.input_ids.insert(e.input_ids.end(), b->begin(), b->end());
    if (options.add_special_tokens) e.input_ids.push_back(sep_id_);
    e.token_type_ids.resize(e.input_ids.size(), 1);
  }
  e.attention_mask.assign(e.input_ids.size(), 1);
  if (options.padding == Padding::kMaxLength) {
    EMBER_CHECK(limit != kNoLimit, "BertTokenizer: padding to max_length needs EncodeOptions::max_length ",
                "(the tokenizer config gives no model_max_length)");
    pad(e, limit, pad_id_);
  }
  return e;
}

Encoding BertTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  return encode_ids(token_ids(text), std::nullopt, options);
}

Encoding BertTokenizer::encode(std::string_view text, std::string_view pair,
                               const EncodeOptions& options) const {
  return encode_ids(token_ids(text), token_ids(pair), options);
}

BatchEncoding BertTokenizer::to_tensors(const std::vector<Encoding>& rows,
                                        const EncodeOptions& options) const {
  size_t length = 0;
  for (const Encoding& e : rows) length = std::max(length, e.input_ids.size());
  const auto batch = static_cast<int64_t>(rows.size()), len = static_cast<int64_t>(length);
  BatchEncoding out{empty({batch, len}, dtype(kInt64)), empty({batch, len}, dtype(kInt64)),
                    empty({batch, len}, dtype(kInt64))};
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* types = out.token_type_ids.data_ptr<int64_t>();
  int64_t* mask = out.attention_mask.data_ptr<int64_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    Encoding e = rows[r];
    // Rows longer than max_length (no truncation) keep their length, as in Hugging Face.
    EMBER_CHECK(e.input_ids.size() == length || options.padding == Padding::kLongest,
                "BertTokenizer: batch rows have different lengths (row ", r, ": ", e.input_ids.size(),
                ", longest: ", length, "); pass padding kLongest, or truncation");
    pad(e, len, pad_id_);
    std::copy(e.input_ids.begin(), e.input_ids.end(), ids + r * length);
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(), types + r * length);
    std::copy(e.attention_mask.begin(), e.attention_mask.end(), mask + r * length);
  }
  return out;
}

BatchEncoding BertTokenizer::encode_batch(const std::vector<std::string>& texts,
                                          const EncodeOptions& options) const {
  std::vector<Encoding> rows;
  for (const std::string& t : texts) rows.push_back(encode(t, options));
  return to_tensors(rows, options);
}

BatchEncoding BertTokenizer::encode_batch(const std::vector<std::string>& texts,
                                          const std::vector<std::string>& pairs,
                                          const EncodeOptions& options) const {
  EMBER_CHECK(texts.size() == pairs.size(), "BertTokenizer: encode_batch got ", texts.size(), " texts and ",
              pairs.size(), " pairs");
  std::vector<Encoding> rows;
  for (size_t i = 0; i < texts.size(); ++i) rows.push_back(encode(texts[i], pairs[i], options));
  return to_tensors(rows, options);
}

}  // namespace ember::text
