#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ember::text {

// Hugging Face's tokenizer_config.json for BERT: the keys BertTokenizer reads, with its defaults
// (bert-base-uncased's).
struct TokenizerConfig {
  bool do_lower_case = true;
  std::optional<bool> strip_accents;  // nullopt (JSON null): follows do_lower_case
  bool tokenize_chinese_chars = true;
  std::vector<std::string> never_split;
  // The length truncation and max_length padding use when EncodeOptions name none; "no limit"
  // when the file gives none (or Hugging Face's 1e30 placeholder).
  int64_t model_max_length = std::numeric_limits<int64_t>::max();
  std::string unk_token = "[UNK]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string cls_token = "[CLS]";
  std::string mask_token = "[MASK]";
};

// Reads tokenizer_config.json through nlohmann-json; keys it does not know are ignored (as
// transformers passes them on). Throws ember::Error naming the file and the key or line when the
// file cannot be read, is not JSON, or a key has the wrong type, and always in a build without
// nlohmann-json (text/no_nlohmann_json/).
TokenizerConfig read_tokenizer_config(const std::string& path);

bool has_nlohmann_json();

}  // namespace ember::text
