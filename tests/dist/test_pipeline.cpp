// Pipeline parallelism over Gloo with 2 and 4 processes: four linear layers cut into one stage
// per rank, a batch of 8 rows in 4 micro-batches, GPipe and 1F1B. The last stage's output and the
// micro-batches' losses are the whole model's on the whole batch (checkpointed stages too), 1F1B
// holds fewer micro-batches; each
// stage's gradients and its parameters after AdamW steps are that model's. In one process: a pipeline of one
// stage, errors.
#include <ember/distributed/pipeline.h>
#include <ember/nn/linear.h>
#include <ember/optim/adam.h>

#include <cstdlib>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

constexpr int kLayers = 4;
constexpr int64_t kWidth = 8, kRows = 8, kMicrobatches = 4;
const Tolerance kF32{1e-5, 1e-6};

std::vector<nn::Linear> make_layers() {
  manual_seed(21);
  std::vector<nn::Linear> layers;
  for (int i = 0; i < kLayers; ++i) layers.emplace_back(kWidth, kWidth);
  return layers;
}

// Layers [first, last) with tanh between them (and after every layer but the model's last).
Tensor run_layers(const std::vector<nn::Linear>& layers, int first, int last, Tensor x) {
  for (int i = first; i < last; ++i) {
    x = layers[i](x);
    if (i + 1 < kLayers) x = tanh(x);
  }
  return x;
}

std::vector<Tensor> params_of(const std::vector<nn::Linear>& layers, int first, int last) {
  std::vector<Tensor> p;
  for (int i = first; i < last; ++i)
    for (const Tensor& t : layers[i]->parameters()) p.push_back(t);
  return p;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

DIST_WORKER(pipeline_matches_one_process) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), world = d::get_world_size();
  const bool one_f_one_b = std::string(std::getenv("PIPELINE_SCHEDULE")) == "1f1b";
  const int per = kLayers / world, first = rank * per, last = first + per;
  std::vector<nn::Linear> mine = make_layers(), ref = make_layers();
  const bool checkpoint = std::string(std::getenv("PIPELINE_CHECKPOINT")) == "1";
  int calls = 0;  // of the stage's forward: checkpointing runs it again in backward
  d::PipelineStage stage(
      [&](const Tensor& x) {
        ++calls;
        return run_layers(mine, first, last, x);
      },
      nullptr, kCPU, checkpoint);
  std::unique_ptr<d::PipelineSchedule> schedule;
  if (one_f_one_b)
    schedule = std::make_unique<d::Schedule1F1B>(stage, kMicrobatches, mse);
  else
    schedule = std::make_unique<d::ScheduleGPipe>(stage, kMicrobatches, mse);
  optim::AdamW opt(params_of(mine, first, last), optim::AdamWOptions(1e-2));
  optim::AdamW ref_opt(params_of(ref, 0, kLayers), optim::AdamWOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    manual_seed(300 + step);
    Tensor x = randn({kRows, kWidth}), y = randn({kRows, kWidth});
    opt.zero_grad();
    ref_opt.zero_grad();
    Tensor ref_out = run_layers(ref, 0, kLayers, x);
    Tensor ref_loss = mse(ref_out, y);
    ref_loss.backward();
    std::vector<Tensor> losses;
    calls = 0;
    Tensor out = schedule->step(stage.is_first() ? x : Tensor(), stage.is_last() ? y : Tensor(), &losses);
    if (calls != (checkpoint ? 2 : 1) * kMicrobatches)
      throw Error(
          detail::str_cat("the stage's forward ran ", calls, " times for ", kMicrobatches, " micro-batches"));
    if (stage.is_last()) {
      check_close(out, ref_out, "output", kF32);
      if (losses.size() != static_cast<size_t>(kMicrobatches))
        throw Error("expected one loss per micro-batch");
      check_close(stack(losses).mean(), ref_loss, "mean of the micro-batches' losses", kF32);
    } else if (out.defined()) {
      throw Error("only the last stage returns the output");
    }
    // GPipe holds every micro-batch; 1F1B at most as many as the stages from this one on.
    const int peak = one_f_one_b ? std::min<int>(kMicrobatches, world - rank) : kMicrobatches;
    if (schedule->peak_in_flight() != peak)
      throw Error(detail::str_cat("stage ", rank, " held ", schedule->peak_in_flight(),
                                  " micro-batches at once, ", "expected ", peak));
    std::vector<Tensor> got = params_of(mine, first, last), want = params_of(ref, first, last);
    for (size_t i = 0; i < got.size(); ++i)
      check_close(got[i].grad(), want[i].grad(), "gradient " + std::to_string(i), kF32);
    opt.step();
    ref_opt.step();
    for (size_t i = 0; i < got.size(); ++i)
      check_close(got[i], want[i], "parameter after a step " + std::to_string(i), kF32);
  }
}

class Pipeline : public ::testing::TestWithParam<int> {};

TEST_P(Pipeline, GPipeMatchesOneProcess) {
  run_workers("pipeline_matches_one_process", GetParam(),
              {{"PIPELINE_SCHEDULE", "gpipe"}, {"PIPELINE_CHECKPOINT", "0"}});
}
TEST_P(Pipeline, OneForwardOneBackwardMatchesOneProcess) {
  run_workers("pipeline_matches_one_process", GetParam(),
              {{"PIPELINE_SCHEDULE", "1f1b"}, {"PIPELINE_CHECKPOINT", "0"}});
}
TEST_P(Pipeline, CheckpointedStagesMatchOneProcess) {
  run_workers("pipeline_matches_one_process", GetParam(),
              {{"PIPELINE_SCHEDULE", "1f1b"}, {"PIPELINE_CHECKPOINT", "1"}});
}
INSTANTIATE_TEST_SUITE_P(Gloo, Pipeline, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// One stage is the first and the last: the whole model on micro-batches, gradients accumulated.
TEST(Pipeline, OneStageIsTheWholeModel) {
  auto pg = group_of_one();
  std::vector<nn::Linear> mine = make_layers(), ref = make_layers();
  d::PipelineStage stage([&](const Tensor& x) { return run_layers(mine, 0, kLayers, x); }, pg);
  EXPECT_TRUE(stage.is_first() && stage.is_last());
  d::Schedule1F1B schedule(stage, kMicrobatches, mse);
  Tensor x = randn({kRows, kWidth}), y = randn({kRows, kWidth});
  Tensor out = schedule.step(x, y);
  Tensor ref_out = run_layers(ref, 0, kLayers, x);
  mse(ref_out, y).backward();
  EXPECT_CLOSE(out, ref_out.detach());
  std::vector<Tensor> got = params_of(mine, 0, kLayers), want = params_of(ref, 0, kLayers);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_CLOSE(got[i].grad(), want[i].grad(), kF32);
}

TEST(PipelineErrors, Arguments) {
  auto pg = group_of_one();
  EXPECT_EMBER_ERROR(d::PipelineStage(nullptr, pg), "PipelineStage", "empty");
  d::PipelineStage stage([](const Tensor& x) { return x * 2; }, pg);
  EXPECT_EMBER_ERROR(d::ScheduleGPipe(stage, 0, mse), "PipelineSchedule", "n_microbatches");
  EXPECT_EMBER_ERROR(d::ScheduleGPipe(stage, 2, nullptr), "PipelineSchedule", "loss function");
  d::ScheduleGPipe schedule(stage, 4, mse);
  EXPECT_EMBER_ERROR(schedule.step(Tensor(), ones({4, 2})), "PipelineSchedule::step", "needs the input");
  EXPECT_EMBER_ERROR(schedule.step(ones({4, 2})), "PipelineSchedule::step", "needs the target");
  EXPECT_EMBER_ERROR(schedule.step(ones({3, 2}), ones({3, 2})), "PipelineSchedule::step",
                     "fewer rows than the 4 micro-batches");
}

}  // namespace
}  // namespace ember::testing::dist
