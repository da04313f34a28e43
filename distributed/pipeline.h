#pragma once

// Pipeline parallelism (torch.distributed.pipelining): a model cut into stages, one per rank of
// a group (stage i on the group's rank i), trained on micro-batches that flow through them.
// Activations go to the next stage and their gradients back to the previous one by send/recv.
// - ScheduleGPipe: every micro-batch's forward, then every backward.
// - Schedule1F1B: (stages - stage - 1) forwards to fill the pipe, then one forward and one
//   backward in turn, then the remaining backwards: a stage keeps at most `stages` micro-batches'
//   activations, where GPipe keeps all of them.
// Each micro-batch's loss is divided by their number, so the gradients are those of the mean of
// the micro-batches' losses: for equal micro-batches and a mean loss, the whole batch's.
//
//   distributed::PipelineStage stage([&](const Tensor& x) { return part->forward(x); }, rank, world);
//   distributed::Schedule1F1B schedule(stage, /*n_microbatches=*/4, loss_fn);
//   if (stage.is_first()) schedule.step(x);             // the first stage takes the input,
//   else if (stage.is_last()) schedule.step({}, y, &losses);  // the last the targets,
//   else schedule.step();                               // the others neither
//   optimizer.step();                                    // each rank its own stage's parameters

#include <functional>
#include <memory>
#include <vector>

#include "ember/core/device.h"
#include "ember/distributed/process_group.h"

namespace ember::distributed {

class PipelineStage {
 public:
  using Forward = std::function<Tensor(const Tensor&)>;
  // `forward`: this stage's part of the model. `group` null: the default group. Activations
  // between stages live on `device` (CUDA for NCCL). With `checkpoint`, the stage keeps only each
  // micro-batch's input and recomputes the rest in its backward (autograd::checkpoint).
  PipelineStage(Forward forward, const std::shared_ptr<ProcessGroup>& group = nullptr, Device device = kCPU,
                bool checkpoint = false);

  int stage_index() const { return group_->rank(); }
  int num_stages() const { return group_->size(); }
  bool is_first() const { return stage_index() == 0; }
  bool is_last() const { return stage_index() == num_stages() - 1; }

 private:
  friend class PipelineSchedule;
  Forward forward_;
  std::shared_ptr<ProcessGroup> group_;
  Device device_;
  bool checkpoint_;
};

// What the schedules share: running one micro-batch's forward or backward on a stage.
class PipelineSchedule {
 public:
  using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
  PipelineSchedule(PipelineStage& stage, int n_microbatches, LossFn loss_fn);
  virtual ~PipelineSchedule() = default;

  // One pass over a batch: `input` on the first stage and `target` on the last (each split into
  // the micro-batches along dim 0), nothing elsewhere. Gradients accumulate into the stage's
  // parameters; the last stage appends each micro-batch's (unscaled) loss to `losses` when given.
  // Returns the last stage's output, the micro-batches' outputs concatenated (undefined elsewhere).
  Tensor step(const Tensor& input = {}, const Tensor& target = {}, std::vector<Tensor>* losses = nullptr);
  // The most micro-batches whose activations this stage held at once during the last step.
  int peak_in_flight() const { return peak_in_flight_; }

 protected:
  // The order of forward(m) and backward(m) calls of this stage.
  virtual void run() = 0;
  void forward(int m);
  void backward(int m);
  int n_microbatches() const { return n_; }
  const PipelineStage& stage() const { return stage_; }

 private:
  struct Microbatch {
    Tensor input, output, loss;
  };
  PipelineStage& stage_;
  int n_;
  LossFn loss_fn_;
  std::vector<Tensor> inputs_, targets_;
  std::vector<Microbatch> mbs_;
  std::vector<std::shared_ptr<Work>> sends_;
  std::vector<Tensor> outputs_;
  int in_flight_ = 0, peak_in_flight_ = 0;
};

class ScheduleGPipe : public PipelineSchedule {
 public:
  using PipelineSchedule::PipelineSchedule;

 protected:
  void run() override;
};

class Schedule1F1B : public PipelineSchedule {
 public:
  using PipelineSchedule::PipelineSchedule;

 protected:
  void run() override;
};

}  // namespace ember::distributed
