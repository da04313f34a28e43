// examples/train_bert as a user runs it, on the CPU: a tiny BERT from random weights learns a
// small labelled CSV; a resumed run after SIGKILL ends where an uninterrupted one does; bad input
// is a clear error.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "ember/text/unicode.h"
#include "test_util.h"
#include "trainer_outputs.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

int run_trainer(const std::string& args, const fs::path& log) {
  return run_program(EMBER_TRAIN_BERT_PATH, args, log.string());
}

// A model folder (bert-base-uncased's vocab, a 2-layer width-32 config) and a CSV whose label
// follows the words: "good"-words positive, "bad"-words negative, the others neutral.
void write_task(const fs::path& dir) {
  fs::create_directories(dir / "model");
  fs::copy_file(fs::path(EMBER_TEXT_FIXTURES) / "vocab.txt", dir / "model/vocab.txt");
  std::ofstream(dir / "model/config.json")
      << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "max_position_embeddings": 64, "hidden_act": "gelu"})";
  const std::vector<std::string> good{"good", "great", "happy", "love", "nice"},
      bad{"bad", "awful", "sad", "hate", "ugly"}, plain{"car", "road", "table", "window", "paper"};
  std::ofstream csv(dir / "tweets.csv");
  csv << "sentiment,confidence,text\r\n";
  for (int i = 0; i < 240; ++i) {
    const int label = i % 3;
    const auto& words = label == 0 ? bad : label == 1 ? plain : good;
    csv << (label == 0   ? "negative"
            : label == 1 ? "neutral"
                         : "positive")
        << ",1,\"the " << words[i % 5] << ", " << plain[(i / 3) % 5] << " and " << words[(i / 7) % 5]
        << "\"\r\n";
  }
}

TEST(TrainBert, LearnsAndResumesBitExactly) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember was built without utf8proc";
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_task(dir);
  const std::string common =
      "--model " + (dir / "model").string() + " --data " + (dir / "tweets.csv").string() +
      " --random-init --device cpu --epochs 6 --batch-size 16 --lr 3e-3 --workers 2 --seed 4";
  ASSERT_EQ(run_trainer(common + " --checkpoint " + (dir / "a/ckpt.safetensors").string(), dir / "a.log"), 0)
      << read_text(dir / "a.log");
  const std::string log = read_text(dir / "a.log");
  EXPECT_NE(log.find("216 train / 24 test texts, labels negative, neutral, positive"), std::string::npos)
      << log;
  const std::vector<double> loss = metric((dir / "a/metrics.jsonl").string(), "train_loss");
  const std::vector<double> acc = metric((dir / "a/metrics.jsonl").string(), "test_accuracy");
  ASSERT_EQ(loss.size(), 6u) << log;
  EXPECT_LT(loss.back(), 0.5 * loss.front()) << log;
  EXPECT_GT(acc.back(), 0.6) << log;

  // Killed by SIGKILL in the second epoch (14 steps an epoch), then resumed: the same weights.
  const std::string b = common + " --checkpoint " + (dir / "b/ckpt.safetensors").string() + " --resume";
  const int status = run_trainer(b + " --debug-sigkill-at-step 20", dir / "b1.log");
  ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL))
      << "status " << status << "\n"
      << read_text(dir / "b1.log");
  ASSERT_EQ(run_trainer(b, dir / "b2.log"), 0) << read_text(dir / "b2.log");
  const optim::Checkpoint ca = optim::Checkpoint::load((dir / "a/ckpt.safetensors").string());
  const optim::Checkpoint cb = optim::Checkpoint::load((dir / "b/ckpt.safetensors").string());
  const auto& ta = ca.get("model").tensors;
  const auto& tb = cb.get("model").tensors;
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [key, t] : ta) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(bit_equal(t, tb.at(key)));
  }
}

TEST(TrainBert, MaskedLMPretrainingLearnsAndSavesForTransformers) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember was built without utf8proc";
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_task(dir);
  const std::string args =
      "--task mlm --model " + (dir / "model").string() + " --data " + (dir / "tweets.csv").string() +
      " --random-init --device cpu --epochs 4 --batch-size 16 --lr 3e-3 --workers 2 --seed 1" +
      " --metrics " + (dir / "mlm.jsonl").string() + " --save-pretrained " + (dir / "out").string() +
      " --save-split " + (dir / "split.txt").string();
  ASSERT_EQ(run_trainer(args, dir / "mlm.log"), 0) << read_text(dir / "mlm.log");
  const std::string log = read_text(dir / "mlm.log");
  // The corpus's 26 distinct words are learnt: the masked tokens' loss falls well below log(30522).
  const std::vector<double> loss = metric((dir / "mlm.jsonl").string(), "train_loss");
  const std::vector<double> test_loss = metric((dir / "mlm.jsonl").string(), "test_masked_loss");
  ASSERT_EQ(loss.size(), 4u) << log;
  EXPECT_LT(loss.back(), 0.6 * loss.front()) << log;
  EXPECT_LT(test_loss.back(), 0.6 * std::log(30522.0)) << log;
  EXPECT_EQ(metric((dir / "mlm.jsonl").string(), "test_masked_accuracy").size(), 4u);
  EXPECT_TRUE(fs::exists(dir / "out/config.json") && fs::exists(dir / "out/model.safetensors")) << log;
  // The split: a header with the CSV's row count, then 216 and 24 distinct rows.
  std::istringstream split(read_text(dir / "split.txt"));
  std::string name, line;
  std::vector<int64_t> seen;
  std::getline(split, line);
  EXPECT_EQ(line, "rows 240");
  for (const char* side : {"train", "test"}) {
    std::getline(split, line);
    std::istringstream fields(line);
    fields >> name;
    EXPECT_EQ(name, side);
    for (int64_t row; fields >> row;) seen.push_back(row);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen.size(), 240u);
  EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
}

TEST(TrainBert, BadInputIsAClearError) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_task(dir);
  const std::string model = " --model " + (dir / "model").string() + " --random-init --device cpu";
  EXPECT_EQ(WEXITSTATUS(run_trainer("--data " + (dir / "tweets.csv").string(), dir / "1.log")), 2);
  EXPECT_NE(read_text(dir / "1.log").find("--model DIR and --data FILE.csv are required"), std::string::npos);
  EXPECT_EQ(WEXITSTATUS(run_trainer(
                model + " --data " + (dir / "tweets.csv").string() + " --label-column label", dir / "2.log")),
            2);
  EXPECT_NE(read_text(dir / "2.log").find("has no column \"label\""), std::string::npos)
      << read_text(dir / "2.log");
  std::ofstream(dir / "bad.csv") << "sentiment,text\npositive,\"unclosed\n";
  EXPECT_EQ(WEXITSTATUS(run_trainer(model + " --data " + (dir / "bad.csv").string(), dir / "3.log")), 2);
  EXPECT_NE(read_text(dir / "3.log").find("bad.csv:2: a quoted field is never closed"), std::string::npos)
      << read_text(dir / "3.log");
  EXPECT_EQ(WEXITSTATUS(run_trainer(model + " --data " + (dir / "tweets.csv").string() + " --task ner",
                                    dir / "4.log")),
            2);
  EXPECT_NE(read_text(dir / "4.log").find("--task must be classify or mlm, got ner"), std::string::npos)
      << read_text(dir / "4.log");
  // --labels fixes the classes: a row with another label names its line (row 1 is line 2).
  EXPECT_EQ(
      WEXITSTATUS(run_trainer(
          model + " --data " + (dir / "tweets.csv").string() + " --labels negative,positive", dir / "5.log")),
      2);
  EXPECT_NE(read_text(dir / "5.log")
                .find("tweets.csv:3: the label \"neutral\" is not one of --labels "
                      "negative,positive"),
            std::string::npos)
      << read_text(dir / "5.log");
}

}  // namespace
}  // namespace ember::testing
