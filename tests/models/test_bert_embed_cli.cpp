// tools/bert_embed as a user runs it, on a small model folder written here: its embeddings are
// the model's sentence_embedding of the tokenizer's ids, and --similarity their cosines.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ember/examples/models/bert_model.h"
#include "ember/text/bert_tokenizer.h"
#include "ember/text/unicode.h"
#include "test_util.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

TEST(BertEmbedCli, PrintsSentenceEmbeddingsAndCosines) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember was built without utf8proc";
  TempDir tmp;
  const fs::path dir = tmp.path();
  fs::copy_file(fs::path(EMBER_TEXT_FIXTURES) / "vocab.txt", dir / "vocab.txt");
  std::ofstream(dir / "config.json") << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64})";
  manual_seed(11);
  models::BertModel model(models::BertConfig::from_file((dir / "config.json").string()));
  save(StateDict{model->state_dict(), {}}, (dir / "model.safetensors").string());
  const std::vector<std::string> lines{"A man is eating food.", "Self-driving cars? No, thank you!",
                                       "A man is eating food."};
  std::ofstream in(dir / "in.txt");
  for (const auto& l : lines) in << l << '\n';
  in.close();
  const std::string args = "--device cpu --model " + dir.string() + " < " + (dir / "in.txt").string();
  ASSERT_EQ(run_program(EMBER_BERT_EMBED_PATH, args, (dir / "out.txt").string()), 0)
      << read_text(dir / "out.txt");

  // The same computed here, in one padded batch.
  model->eval();
  NoGradGuard no_grad;
  const text::BertTokenizer tokenizer = text::BertTokenizer::from_pretrained(dir.string());
  text::EncodeOptions options;
  options.padding = text::Padding::kLongest;
  const text::BatchEncoding enc = tokenizer.encode_batch(lines, options);
  Tensor want = models::sentence_embedding(model(enc.input_ids, enc.attention_mask).last_hidden_state,
                                           enc.attention_mask);
  std::istringstream out(read_text(dir / "out.txt"));
  std::vector<double> got;
  for (double v; out >> v;) got.push_back(v);
  ASSERT_EQ(got.size(), 3u * 32u) << read_text(dir / "out.txt");
  EXPECT_CLOSE(tensor(got, kFloat64).view({3, 32}), want.to(kFloat64), Tolerance{1e-6, 1e-6});

  // --similarity: lines 1 and 2 (one pair); an odd count of lines is an error.
  std::ofstream(dir / "pair.txt") << lines[0] << '\n' << lines[2] << '\n';
  ASSERT_EQ(
      run_program(EMBER_BERT_EMBED_PATH,
                  "--similarity --device cpu --model " + dir.string() + " < " + (dir / "pair.txt").string(),
                  (dir / "sim.txt").string()),
      0);
  EXPECT_EQ(read_text(dir / "sim.txt"), "1.000000\n");
  const int status =
      run_program(EMBER_BERT_EMBED_PATH,
                  "--similarity --device cpu --model " + dir.string() + " < " + (dir / "in.txt").string(),
                  (dir / "odd.txt").string());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_text(dir / "odd.txt").find("stdin has 3 lines"), std::string::npos)
      << read_text(dir / "odd.txt");
}

}  // namespace
}  // namespace ember::testing
