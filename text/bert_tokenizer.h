#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/text/basic_tokenizer.h"
#include "ember/text/tokenizer_config.h"
#include "ember/text/vocab.h"
#include "ember/text/wordpiece_tokenizer.h"

namespace ember::text {

enum class Padding { kDoNotPad, kLongest, kMaxLength };

struct EncodeOptions {
  bool add_special_tokens = true;  // [CLS] A [SEP] (B [SEP])
  // Hugging Face's "longest_first": drop tokens from the end of the longer sequence until the
  // whole fits in max_length.
  bool truncation = false;
  // Truncation's and kMaxLength padding's length; nullopt: the config's model_max_length.
  std::optional<int64_t> max_length;
  Padding padding = Padding::kDoNotPad;
};

// One sequence: ids, segment ids (0 for A and its [CLS] [SEP], 1 for B [SEP]), and 1 for a
// token, 0 for padding.
struct Encoding {
  std::vector<int64_t> input_ids, token_type_ids, attention_mask;
};

// Encoding's three lists for a batch, as int64 [B, L] tensors on the CPU.
struct BatchEncoding {
  Tensor input_ids, token_type_ids, attention_mask;
};

// Hugging Face's BertTokenizer (the Python one, tokenization_bert.py): special tokens found in
// the text stay whole, the rest goes through BasicTokenizer, then WordPiece. Text is UTF-8;
// invalid bytes become U+FFFD, which cleaning drops as Hugging Face does after
// bytes.decode(errors="replace"). The constructor throws when ember was built without utf8proc.
class BertTokenizer {
 public:
  // Throws ember::Error naming the vocab's file when a special token is missing from it.
  explicit BertTokenizer(Vocab vocab, TokenizerConfig config = {});
  // dir/vocab.txt, and dir/tokenizer_config.json when present (a Hugging Face model folder).
  static BertTokenizer from_pretrained(const std::string& dir);

  std::vector<std::string> tokenize(std::string_view text) const;
  // The ids of tokenize(text): no special tokens, no truncation.
  std::vector<int64_t> token_ids(std::string_view text) const;

  Encoding encode(std::string_view text, const EncodeOptions& options = {}) const;
  Encoding encode(std::string_view text, std::string_view pair, const EncodeOptions& options = {}) const;
  // The rows must come out one length: pass Padding::kLongest, or kMaxLength with truncation,
  // unless they already are.
  BatchEncoding encode_batch(const std::vector<std::string>& texts, const EncodeOptions& options = {}) const;
  BatchEncoding encode_batch(const std::vector<std::string>& texts, const std::vector<std::string>& pairs,
                             const EncodeOptions& options = {}) const;

  const Vocab& vocab() const { return wordpiece_.vocab(); }
  const TokenizerConfig& config() const { return config_; }
  int64_t unk_token_id() const { return unk_id_; }
  int64_t sep_token_id() const { return sep_id_; }
  int64_t pad_token_id() const { return pad_id_; }
  int64_t cls_token_id() const { return cls_id_; }
  int64_t mask_token_id() const { return mask_id_; }

 private:
  Encoding encode_ids(std::vector<int64_t> a, std::optional<std::vector<int64_t>> b,
                      const EncodeOptions& options) const;
  BatchEncoding to_tensors(const std::vector<Encoding>& rows, const EncodeOptions& options) const;
  int64_t max_length(const EncodeOptions& options) const;

  struct SpecialToken {
    std::u32string text;
    int64_t id;
  };

  TokenizerConfig config_;
  WordpieceTokenizer wordpiece_;
  BasicTokenizer basic_;
  std::vector<SpecialToken> special_tokens_;        // found in the raw text, as Hugging Face's tokens_trie
  std::set<std::string, std::less<>> never_split_;  // config_.never_split
  int64_t unk_id_, sep_id_, pad_id_, cls_id_, mask_id_;
};

}  // namespace ember::text
