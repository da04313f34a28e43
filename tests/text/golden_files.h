#pragma once

// The Hugging Face reference files in tests/text/fixtures (tools/golden/hf_tokenizer_golden.py
// writes them) and the MiniLM vocabulary they were made with.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ember/text/bert_tokenizer.h"

namespace ember::testing {

std::string text_fixture(const std::string& name);

// The golden files' escapes back to raw bytes: \\ \t \n \r \xHH.
std::string unescape(std::string_view s);

// A tab-separated file's rows, without its header (the first line).
std::vector<std::vector<std::string>> read_tsv(const std::string& path);

std::vector<int64_t> parse_ids(const std::string& s);

// golden_single.tsv's texts (raw bytes) and ids, in file order: the pair and batch files name
// texts by their row here.
struct GoldenSingle {
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> ids;
};
const GoldenSingle& golden_single();

// MiniLM's tokenizer (fixtures/vocab.txt with bert-base-uncased's rules, which its
// tokenizer_config.json states).
const text::BertTokenizer& minilm_tokenizer();

}  // namespace ember::testing
