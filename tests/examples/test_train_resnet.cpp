// examples/train_resnet as a user runs it: a resumed run after SIGKILL ends bit for bit where an
// uninterrupted one does, and a short run on real Fashion-MNIST learns.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ember/distributed/process_group_gloo.h"
#include "ember/ember.h"
#include "test_util.h"
#include "trainer_outputs.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

int run_trainer(const std::string& args, const fs::path& log) {
  return run_program(EMBER_TRAIN_RESNET_PATH, args, log.string());
}

void write_idx(const fs::path& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  const uint8_t magic[4] = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (uint32_t d : dims) {
    const uint8_t be[4] = {static_cast<uint8_t>(d >> 24), static_cast<uint8_t>(d >> 16),
                           static_cast<uint8_t>(d >> 8), static_cast<uint8_t>(d)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// A small MNIST-format set: 12x12 images of noise with a bright 6x6 square in the quadrant the
// label (0..3) names.
void write_quadrants(const fs::path& dir, const std::string& prefix, uint32_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> images(n * 144), labels(n);
  for (uint32_t i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(gen() % 4);
    for (int p = 0; p < 144; ++p) {
      const int y = p / 12, x = p % 12;
      const bool lit = (y / 6) * 2 + (x / 6) == labels[i];
      images[i * 144 + p] = static_cast<uint8_t>(gen() % 64 + (lit ? 160 : 0));
    }
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {n, 12, 12}, images);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {n}, labels);
}

// The model and optimizer state of two checkpoints, bit for bit.
void expect_same_state(const fs::path& a, const fs::path& b) {
  optim::Checkpoint ca = optim::Checkpoint::load(a.string());
  optim::Checkpoint cb = optim::Checkpoint::load(b.string());
  ASSERT_EQ(ca.has("averaged_model"), cb.has("averaged_model"));
  for (const char* part : {"model", "optimizer", "averaged_model"}) {
    if (!ca.has(part)) continue;
    const auto& ta = ca.get(part).tensors;
    const auto& tb = cb.get(part).tensors;
    ASSERT_EQ(ta.size(), tb.size()) << part;
    ASSERT_GT(ta.size(), 0u) << part;
    for (const auto& [key, t] : ta) {
      SCOPED_TRACE(std::string(part) + "." + key);
      ASSERT_TRUE(tb.contains(key));
      EXPECT_TRUE(bit_equal(t, tb.at(key)));
    }
  }
}

int metrics_lines(const fs::path& file) {
  std::ifstream metrics(file);
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  return lines;
}

TEST(TrainResnet, ResumeAfterSigkillOrSigtermIsBitExact) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_quadrants(dir, "train", 96, 1);
  write_quadrants(dir, "t10k", 32, 2);
  // 3 epochs of 6 steps; augmentation, shuffling, two loader workers and a weight average
  // (updated every 2 steps, a copy during the first epoch's warmup) all in play.
  const std::string common =
      "--dataset mnist --data-dir " + dir.string() +
      " --device cpu --epochs 3 --batch-size 16 --workers 2 --seed 5 --warmup-epochs 1 --model-ema "
      "--model-ema-steps 2";
  ASSERT_EQ(run_trainer(common + " --checkpoint " + (dir / "a/ckpt.safetensors").string(), dir / "a.log"), 0)
      << read_text(dir / "a.log");
  EXPECT_TRUE(optim::Checkpoint::load((dir / "a/ckpt.safetensors").string()).has("averaged_model"));

  // Killed in the middle of the second epoch (step 9 of 18), after the first epoch's checkpoint.
  const std::string b = common + " --checkpoint " + (dir / "b/ckpt.safetensors").string() + " --resume";
  const int status = run_trainer(b + " --debug-sigkill-at-step 9", dir / "b1.log");
  ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL))
      << "status " << status << "\n"
      << read_text(dir / "b1.log");
  ASSERT_EQ(run_trainer(b, dir / "b2.log"), 0) << read_text(dir / "b2.log");
  EXPECT_NE(read_text(dir / "b2.log").find("resumed from"), std::string::npos) << read_text(dir / "b2.log");
  expect_same_state(dir / "a/ckpt.safetensors", dir / "b/ckpt.safetensors");
  // The resumed run's metrics continue the interrupted run's file: one record per epoch.
  EXPECT_EQ(metrics_lines(dir / "b/metrics.jsonl"), 3);

  // SIGTERM before step 9: that step finishes, the checkpoint holds 10 steps (epoch 2, batch 4),
  // the exit is 0, and the resumed run starts at the loader's fifth batch of epoch 2.
  const std::string c = common + " --checkpoint " + (dir / "c/ckpt.safetensors").string() + " --resume";
  ASSERT_EQ(run_trainer(c + " --debug-sigterm-at-step 9", dir / "c1.log"), 0) << read_text(dir / "c1.log");
  EXPECT_NE(read_text(dir / "c1.log").find("stopped by a signal after step 10"), std::string::npos)
      << read_text(dir / "c1.log");
  EXPECT_EQ(metrics_lines(dir / "c/metrics.jsonl"), 1);
  ASSERT_EQ(run_trainer(c, dir / "c2.log"), 0) << read_text(dir / "c2.log");
  EXPECT_NE(read_text(dir / "c2.log").find("at step 10 (epoch 2, batch 4)"), std::string::npos)
      << read_text(dir / "c2.log");
  expect_same_state(dir / "a/ckpt.safetensors", dir / "c/ckpt.safetensors");
  EXPECT_EQ(metrics_lines(dir / "c/metrics.jsonl"), 3);
}

// emberrun --nproc-per-node 2 over Gloo, with SyncBatchNorm: each process trains on its half of
// every batch; only rank 0 writes the metrics and the checkpoint, and the checkpoint is the same
// model the ranks trained (DDP kept them equal).
TEST(TrainResnet, TwoProcessesOverGloo) {
  if (!distributed::is_gloo_available()) GTEST_SKIP() << "ember was built without Gloo";
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_quadrants(dir, "train", 64, 3);
  write_quadrants(dir, "t10k", 16, 4);
  const std::string args = std::string("--nproc-per-node 2 --master-port 0 ") + EMBER_TRAIN_RESNET_PATH +
                           " --dataset mnist --data-dir " + dir.string() +
                           " --device cpu --epochs 2 --batch-size 8 --workers 1 --sync-bn --checkpoint " +
                           (dir / "run/ckpt.safetensors").string();
  const std::string cmd =
      std::string(EMBER_EMBERRUN_PATH) + " " + args + " > " + (dir / "log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(dir / "log");
  const std::string log = read_text(dir / "log");
  EXPECT_NE(log.find("batch 8 x 2 processes"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 2/2: train loss"), std::string::npos) << log;
  std::ifstream metrics(dir / "run/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  EXPECT_EQ(lines, 2);
  optim::Checkpoint c = optim::Checkpoint::load((dir / "run/ckpt.safetensors").string());
  EXPECT_TRUE(c.has("model"));
}

// A stop request that reaches rank 0 alone (a signal to one process) stops both ranks after the
// same step: they agree every StopRequest::kCheckEvery (20) steps. Both exit 0, the checkpoint
// holds 20 steps, and the resumed job finishes.
TEST(TrainResnet, TwoProcessesStopTogetherOnSigterm) {
  if (!distributed::is_gloo_available()) GTEST_SKIP() << "ember was built without Gloo";
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_quadrants(dir, "train", 64, 3);
  write_quadrants(dir, "t10k", 16, 4);
  // 16 steps per epoch (32 images per rank, batches of 2), 2 epochs.
  const std::string cmd = std::string(EMBER_EMBERRUN_PATH) + " --nproc-per-node 2 --master-port 0 " +
                          EMBER_TRAIN_RESNET_PATH + " --dataset mnist --data-dir " + dir.string() +
                          " --device cpu --epochs 2 --batch-size 2 --workers 1 --resume --checkpoint " +
                          (dir / "run/ckpt.safetensors").string();
  ASSERT_EQ(std::system((cmd + " --debug-sigterm-at-step 5 > " + (dir / "1.log").string() + " 2>&1").c_str()),
            0)
      << read_text(dir / "1.log");
  EXPECT_NE(read_text(dir / "1.log").find("stopped by a signal after step 20"), std::string::npos)
      << read_text(dir / "1.log");
  ASSERT_EQ(std::system((cmd + " > " + (dir / "2.log").string() + " 2>&1").c_str()), 0)
      << read_text(dir / "2.log");
  const std::string log = read_text(dir / "2.log");
  EXPECT_NE(log.find("at step 20 (epoch 2, batch 4)"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 2/2: train loss"), std::string::npos) << log;
  EXPECT_EQ(metrics_lines(dir / "run/metrics.jsonl"), 2);
}

// Fine-tuning: a model trained on 10 classes starts a 4-class run; the classifier is replaced
// (and the trainer says so), and with a frozen backbone only fc changes.
TEST(TrainResnet, FineTunesWithANewHead) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  write_quadrants(dir, "train", 32, 5);
  write_quadrants(dir, "t10k", 16, 6);
  const std::string common =
      "--dataset mnist --data-dir " + dir.string() + " --device cpu --batch-size 16 --workers 1";
  const std::string base = (dir / "base/ckpt.safetensors").string(),
                    tuned = (dir / "tuned/ckpt.safetensors").string();
  ASSERT_EQ(run_trainer(common + " --epochs 1 --checkpoint " + base, dir / "1.log"), 0)
      << read_text(dir / "1.log");
  ASSERT_EQ(run_trainer(common + " --epochs 2 --num-classes 4 --freeze-backbone --init-from " + base +
                            " --checkpoint " + tuned,
                        dir / "2.log"),
            0)
      << read_text(dir / "2.log");
  const std::string log = read_text(dir / "2.log");
  EXPECT_NE(log.find("a new classifier: fc.weight [10, 512] -> [4, 512]"), std::string::npos) << log;
  const optim::Checkpoint base_ckpt = optim::Checkpoint::load(base),
                          tuned_ckpt = optim::Checkpoint::load(tuned);
  const auto& before = base_ckpt.get("model").tensors;
  const auto& after = tuned_ckpt.get("model").tensors;
  EXPECT_TRUE(bit_equal(before.at("layer3.1.conv2.weight"), after.at("layer3.1.conv2.weight")));
  EXPECT_TRUE(bit_equal(before.at("bn1.running_mean"), after.at("bn1.running_mean")));  // frozen BatchNorm
  EXPECT_TRUE(after.at("fc.weight").sizes().equals({4, 512}));
  // A backbone of another shape is an error that names the tensor.
  EXPECT_EQ(
      WEXITSTATUS(run_trainer(common + " --epochs 1 --arch resnet34 --init-from " + base, dir / "3.log")), 2);
  EXPECT_NE(read_text(dir / "3.log").find("layer1.2"), std::string::npos) << read_text(dir / "3.log");
}

TEST(TrainResnet, BadArgumentsAreClearErrors) {
  TempDir tmp;
  const fs::path dir = tmp.path();
  EXPECT_EQ(WEXITSTATUS(run_trainer("--dataset nosuch --device cpu", dir / "1.log")), 2);
  EXPECT_NE(read_text(dir / "1.log").find("unknown --dataset nosuch"), std::string::npos)
      << read_text(dir / "1.log");
  EXPECT_EQ(WEXITSTATUS(run_trainer("--dataset mnist --data-dir " + (dir / "none").string() + " --device cpu",
                                    dir / "2.log")),
            2);
  EXPECT_NE(read_text(dir / "2.log").find("missing file"), std::string::npos) << read_text(dir / "2.log");
  EXPECT_EQ(WEXITSTATUS(run_trainer("--epochs x", dir / "3.log")), 2);
  EXPECT_EQ(WEXITSTATUS(run_trainer("--device cpu --cuda-graphs", dir / "4.log")), 2);
  EXPECT_NE(read_text(dir / "4.log").find("--cuda-graphs needs one process on a CUDA device"),
            std::string::npos)
      << read_text(dir / "4.log");
}

// CI's smoke run on the real data (Debian's dataset-fashion-mnist, which the scripts install):
// a few hundred images on the CPU; the training loss falls and the test accuracy beats chance.
TEST(TrainResnet, LearnsFashionMnist) {
  const fs::path data = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(data / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no " << data << " (dataset-fashion-mnist)";
  TempDir tmp;
  const fs::path dir = tmp.path();
  // About 25 s on 2 cores: 3 epochs of 12 steps, ResNet-18 at 1.3 GFLOP a training image.
  const std::string args =
      "--dataset fashion-mnist --device cpu --limit-train 384 --limit-test 128 --epochs 3 "
      "--batch-size 32 --lr 0.2 --warmup-epochs 1 --workers 1 --model-ema --model-ema-steps 1 "
      "--model-ema-decay 0.99 --metrics " +
      (dir / "m.jsonl").string();
  ASSERT_EQ(run_trainer(args, dir / "log"), 0) << read_text(dir / "log");
  const std::vector<double> loss = metric((dir / "m.jsonl").string(), "train_loss");
  const std::vector<double> top1 = metric((dir / "m.jsonl").string(), "test_top1");
  ASSERT_EQ(loss.size(), 3u) << read_text(dir / "log");
  EXPECT_LT(loss.back(), 0.8 * loss.front()) << read_text(dir / "log");
  EXPECT_GT(top1.back(), 0.3) << read_text(dir / "log");
  // The weight average (decay 0.893 a step after torchvision's adjustment) learned too.
  const std::vector<double> ema_top1 = metric((dir / "m.jsonl").string(), "ema_top1");
  ASSERT_EQ(ema_top1.size(), 3u) << read_text(dir / "log");
  EXPECT_GT(ema_top1.back(), 0.3) << read_text(dir / "log");
}

}  // namespace
}  // namespace ember::testing
