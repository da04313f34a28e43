// bert_embed: sentence embeddings of stdin's lines, as sentence-transformers computes them (the
// encoder's last hidden states averaged over the line's tokens, L2-normalized): one output line
// of space-separated numbers per input line. With --similarity, the cosine of each pair of
// consecutive lines (1 and 2, 3 and 4, ...) instead, one number per pair.
//
//   bert_embed --model DIR [--max-length 256] [--batch-size 64] [--device cpu|cuda] [--similarity]
//
// DIR is a Hugging Face model folder: config.json, vocab.txt, model.safetensors (and
// tokenizer_config.json when there is one), as scripts/fetch_minilm.sh makes for all-MiniLM-L6-v2.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <ember/ember.h>
#include <ember/examples/models/bert_model.h>
#include <ember/examples/models/bert_pretrained.h>
#include <ember/text/bert_tokenizer.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;

int main(int argc, char** argv) {
  std::string model_dir, device;
  int64_t max_length = 256, batch_size = 64;
  bool similarity = false;
  tools::ArgParser args("bert_embed");
  args.option("--model", &model_dir,
              "a Hugging Face model folder (config.json, vocab.txt, model.safetensors)")
      .option("--max-length", &max_length, "tokens per line at most, [CLS] and [SEP] included (truncation)")
      .option("--batch-size", &batch_size, "lines per forward pass")
      .option("--device", &device, "cpu or cuda (default: cuda when there is a GPU)")
      .flag("--similarity", &similarity, "print the cosine of each pair of consecutive lines");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  if (model_dir.empty()) return args.fail("--model is required");
  if (max_length < 2 || batch_size < 1)
    return args.fail("--max-length must be 2 or more, --batch-size positive");
  try {
    const Device dev(device.empty() ? (cuda::is_available() ? "cuda" : "cpu") : device);
    const text::BertTokenizer tokenizer = text::BertTokenizer::from_pretrained(model_dir);
    models::BertModel model(models::BertConfig::from_file(model_dir + "/config.json"));
    const nn::IncompatibleKeys keys = models::load_pretrained(*model, model_dir);
    for (const auto& k : keys.missing_keys)
      std::fprintf(stderr, "bert_embed: %s is not in the weights\n", k.c_str());
    model->to(dev);
    model->eval();
    NoGradGuard no_grad;

    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
    EMBER_CHECK(!similarity || lines.size() % 2 == 0,
                "bert_embed: --similarity pairs consecutive lines, but stdin has ", lines.size(), " lines");
    text::EncodeOptions options;
    options.truncation = true;
    options.max_length = max_length;
    options.padding = text::Padding::kLongest;
    std::vector<Tensor> embeddings;
    for (size_t start = 0; start < lines.size(); start += static_cast<size_t>(batch_size)) {
      const std::vector<std::string> batch(
          lines.begin() + static_cast<std::ptrdiff_t>(start),
          lines.begin() +
              static_cast<std::ptrdiff_t>(std::min(lines.size(), start + static_cast<size_t>(batch_size))));
      const text::BatchEncoding enc = tokenizer.encode_batch(batch, options);
      Tensor mask = enc.attention_mask.to(dev);
      models::BertOutput out = model(enc.input_ids.to(dev), mask, enc.token_type_ids.to(dev));
      embeddings.push_back(models::sentence_embedding(out.last_hidden_state, mask).cpu());
    }
    if (lines.empty()) return 0;
    Tensor e = cat(embeddings).to(kFloat32).contiguous();
    const float* p = e.data_ptr<float>();
    const int64_t n = e.size(0), h = e.size(1);
    std::string out;
    if (similarity) {
      for (int64_t i = 0; i < n; i += 2) {
        double dot = 0;
        for (int64_t k = 0; k < h; ++k) dot += static_cast<double>(p[i * h + k]) * p[(i + 1) * h + k];
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f\n", dot);
        out += buf;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t k = 0; k < h; ++k) {
          char buf[32];
          std::snprintf(buf, sizeof buf, k ? " %.7g" : "%.7g", static_cast<double>(p[i * h + k]));
          out += buf;
        }
        out += '\n';
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
