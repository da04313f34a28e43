// Training checkpoints: a run saved and resumed equals the run that never stopped, bit for bit.
#include <cstdio>
#include <fstream>

#include "test_util.h"

namespace ember::testing {
namespace {

nn::Sequential make_model() {
  return nn::Sequential(nn::Linear(6, 16), nn::ReLU(), nn::Dropout(0.3), nn::Linear(16, 3));
}

// AdamW + StepLR steps `begin` to `end` on data that depends on the step; dropout draws from the
// global generator, so a resume that forgot the RNG state would diverge.
void train(nn::Sequential& model, optim::AdamW& opt, optim::StepLR& sched, int begin, int end) {
  for (int s = begin; s < end; ++s) {
    Tensor x = arange(48, kFloat32).reshape({8, 6}).sin() + static_cast<double>(s);
    Tensor y = tensor({0, 1, 2, 0, 1, 2, 0, 1});
    opt.zero_grad();
    cross_entropy(model(x), y).backward();
    opt.step();
    sched.step();
  }
}

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

TEST(TrainingCheckpoint, ResumedRunEqualsUninterruptedRunBitForBit) {
  manual_seed(3);
  nn::Sequential straight = make_model();
  OrderedDict<Tensor> init = straight->state_dict();
  nn::Sequential first = make_model();
  first->load_state_dict(init);

  manual_seed(11);
  optim::AdamW opt_a(straight->parameters(), optim::AdamWOptions(1e-2).weight_decay(0.1));
  optim::StepLR sched_a(opt_a, 2, 0.5);
  train(straight, opt_a, sched_a, 0, 6);

  manual_seed(11);
  const std::string path = temp_path("ember_ckpt_resume.safetensors");
  {
    optim::AdamW opt(first->parameters(), optim::AdamWOptions(1e-2).weight_decay(0.1));
    optim::StepLR sched(opt, 2, 0.5);
    train(first, opt, sched, 0, 3);
    optim::save_checkpoint(path, *first, &opt, &sched, 3);
  }
  manual_seed(999);  // the checkpoint restores the generator
  nn::Sequential resumed = make_model();
  optim::AdamW opt_b(resumed->parameters(), optim::AdamWOptions(1e-2).weight_decay(0.1));
  optim::StepLR sched_b(opt_b, 2, 0.5);
  EXPECT_EQ(optim::load_checkpoint(path, *resumed, &opt_b, &sched_b), 3);
  train(resumed, opt_b, sched_b, 3, 6);

  EXPECT_EQ(sched_b.get_last_lr(), sched_a.get_last_lr());
  for (const auto& [name, t] : straight->state_dict()) {
    SCOPED_TRACE(name);
    EXPECT_CLOSE(resumed->state_dict()[name], t, Tolerance{0, 0});
  }
  std::remove(path.c_str());
}

TEST(TrainingCheckpoint, ErrorsNameWhatIsWrong) {
  nn::Sequential model = make_model();
  const std::string path = temp_path("ember_ckpt_errors.safetensors");
  optim::save_checkpoint(path, *model, nullptr, nullptr, 7);
  optim::AdamW opt(model->parameters());
  EXPECT_EMBER_ERROR(optim::load_checkpoint(path, *model, &opt), "Checkpoint", "no part \"optimizer\"", "model");
  EXPECT_EQ(optim::load_checkpoint(path, *model), 7);

  nn::Sequential other(nn::Linear(6, 4));
  EXPECT_EMBER_ERROR(optim::load_checkpoint(path, *other), "load_state_dict");

  {  // a flipped byte in the tensor data fails the tensor's checksum
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff end = f.tellg();
    f.seekp(end - 3);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(end - 3);
    f.write(&c, 1);
  }
  EXPECT_EMBER_ERROR(optim::load_checkpoint(path, *model), "checksum");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ember::testing
