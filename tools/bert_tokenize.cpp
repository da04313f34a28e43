// bert_tokenize: BERT WordPiece ids of stdin's lines, one output line per input line, with
// [CLS]/[SEP], space-separated (Hugging Face BertTokenizer's input_ids).
//
//   bert_tokenize --vocab vocab.txt [--config tokenizer_config.json] [--max-length N] [--pair]
//
// Without --config, bert-base-uncased's rules (lower-case, strip accents). No truncation unless
// --max-length (longest_first). With --pair each line is "text<TAB>pair": a pair is one line so
// that it cannot be split by a stray line; a line without a tab is an error.
#include <iostream>
#include <string>

#include <ember/text/bert_tokenizer.h>
#include <ember/tools/common/arg_parser.h>

int main(int argc, char** argv) {
  std::string vocab, config;
  int64_t max_length = 0;
  bool pair = false;
  ember::tools::ArgParser args("bert_tokenize");
  args.option("--vocab", &vocab, "vocab.txt, one token a line")
      .option("--config", &config, "tokenizer_config.json (default: bert-base-uncased's rules)")
      .option("--max-length", &max_length, "truncate each line to N ids, longest_first (0: no truncation)")
      .flag("--pair", &pair, "each line is text<TAB>pair; print [CLS] text [SEP] pair [SEP]");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  if (vocab.empty()) return args.fail("--vocab is required");
  if (max_length < 0) return args.fail("--max-length must be 0 or positive");
  try {
    const ember::text::BertTokenizer tokenizer(
        ember::text::Vocab::from_file(vocab),
        config.empty() ? ember::text::TokenizerConfig{} : ember::text::read_tokenizer_config(config));
    ember::text::EncodeOptions options;
    if (max_length > 0) options.truncation = true, options.max_length = max_length;
    std::string line, out;
    for (int64_t n = 1; std::getline(std::cin, line); ++n) {
      ember::text::Encoding e;
      if (pair) {
        const size_t tab = line.find('\t');
        EMBER_CHECK(tab != std::string::npos, "bert_tokenize: stdin line ", n,
                    " has no tab (--pair reads text<TAB>pair)");
        e = tokenizer.encode(std::string_view(line).substr(0, tab), std::string_view(line).substr(tab + 1),
                             options);
      } else {
        e = tokenizer.encode(line, options);
      }
      out.clear();
      for (size_t i = 0; i < e.input_ids.size(); ++i) (out += i ? " " : "") += std::to_string(e.input_ids[i]);
      std::cout << out << '\n';
    }
  } catch (const ember::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
