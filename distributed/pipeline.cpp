#include "ember/distributed/pipeline.h"

#include <algorithm>

#include "ember/autograd/checkpoint.h"
#include "ember/core/factories.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/parallel_regions.h"

namespace ember::distributed {

namespace {

constexpr int64_t kMaxDims = 8;  // an activation's rank, in the header sent ahead of it

// Tags keep each message of a step apart: micro-batch m's activation header and data, and its
// gradient.
int tag(int m, int kind) { return m * 3 + kind; }
constexpr int kHeader = 0, kActivation = 1, kGradient = 2;

}  // namespace

PipelineStage::PipelineStage(Forward forward, const std::shared_ptr<ProcessGroup>& group, Device device,
                             bool checkpoint)
    : forward_(std::move(forward)),
      group_(group_or_default("PipelineStage", group)),
      device_(device),
      checkpoint_(checkpoint) {
  EMBER_CHECK(forward_, "PipelineStage: the stage's forward function is empty");
}

PipelineSchedule::PipelineSchedule(PipelineStage& stage, int n_microbatches, LossFn loss_fn)
    : stage_(stage), n_(n_microbatches), loss_fn_(std::move(loss_fn)) {
  EMBER_CHECK(n_ > 0, "PipelineSchedule: n_microbatches must be positive, got ", n_);
  EMBER_CHECK(!stage.is_last() || loss_fn_, "PipelineSchedule: the last stage needs a loss function");
}

Tensor PipelineSchedule::step(const Tensor& input, const Tensor& target, std::vector<Tensor>* losses) {
  const char* op = "PipelineSchedule::step";
  const int s = stage_.stage_index();
  EMBER_CHECK(
      stage_.is_first() == input.defined(), op, ": stage ", s, " of ", stage_.num_stages(),
      stage_.is_first() ? " (the first) needs the input" : " takes no input (only the first stage does)");
  EMBER_CHECK(
      stage_.is_last() == target.defined(), op, ": stage ", s, " of ", stage_.num_stages(),
      stage_.is_last() ? " (the last) needs the target" : " takes no target (only the last stage does)");
  auto split = [&](const Tensor& t, const char* what) {
    EMBER_CHECK(t.dim() >= 1 && t.size(0) >= n_, op, ": the ", what, " of shape ", t.sizes(),
                " has fewer rows than the ", n_, " micro-batches");
    return t.chunk(n_, 0);
  };
  inputs_ = input.defined() ? split(input, "input") : std::vector<Tensor>();
  targets_ = target.defined() ? split(target, "target") : std::vector<Tensor>();
  EMBER_CHECK(inputs_.empty() || static_cast<int>(inputs_.size()) == n_, op, ": the input of ", input.size(0),
              " rows does not split into ", n_, " micro-batches");
  EMBER_CHECK(targets_.empty() || static_cast<int>(targets_.size()) == n_, op, ": the target of ",
              target.size(0), " rows does not split into ", n_, " micro-batches");
  mbs_.assign(n_, {});
  outputs_.clear();
  in_flight_ = peak_in_flight_ = 0;
  run();
  for (const auto& w : sends_) w->wait();
  sends_.clear();
  if (losses && stage_.is_last())
    for (const Microbatch& mb : mbs_) losses->push_back(mb.loss.detach() * n_);
  mbs_.clear();
  return stage_.is_last() ? cat(outputs_, 0) : Tensor();
}

void PipelineSchedule::forward(int m) {
  ProcessGroup& g = *stage_.group_;
  const int s = stage_.stage_index();
  Microbatch& mb = mbs_[m];
  peak_in_flight_ = std::max(peak_in_flight_, ++in_flight_);
  if (stage_.is_first()) {
    mb.input = inputs_[m];
  } else {
    Tensor header = empty({kMaxDims + 2}, TensorOptions(kInt64).device(stage_.device_));
    g.recv(header, s - 1, tag(m, kHeader))->wait();
    const Tensor h = header.cpu();
    const int64_t* v = h.data_ptr<int64_t>();
    mb.input =
        empty(IntArrayRef(v + 2, v[0]), TensorOptions(static_cast<ScalarType>(v[1])).device(stage_.device_));
    g.recv(mb.input, s - 1, tag(m, kActivation))->wait();
    mb.input.requires_grad_(mb.input.is_floating_point());
  }
  Tensor out =
      stage_.checkpoint_ ? autograd::checkpoint(stage_.forward_, mb.input) : stage_.forward_(mb.input);
  if (stage_.is_last()) {
    outputs_.push_back(out.detach());
    mb.loss = loss_fn_(out, targets_[m]) / n_;
    return;
  }
  EMBER_CHECK(out.dim() <= kMaxDims, "PipelineStage: stage ", s, "'s output has ", out.dim(),
              " dims; at most ", kMaxDims, " cross stages");
  Tensor header = zeros({kMaxDims + 2}, kInt64);
  int64_t* v = header.data_ptr<int64_t>();
  v[0] = out.dim();
  v[1] = static_cast<int64_t>(out.dtype());
  std::copy(out.sizes().begin(), out.sizes().end(), v + 2);
  sends_.push_back(g.send(header.to(stage_.device_), s + 1, tag(m, kHeader)));
  sends_.push_back(g.send(out.detach().contiguous(), s + 1, tag(m, kActivation)));
  mb.output = out;
}

void PipelineSchedule::backward(int m) {
  ProcessGroup& g = *stage_.group_;
  const int s = stage_.stage_index();
  Microbatch& mb = mbs_[m];
  if (stage_.is_last()) {
    mb.loss.backward();
  } else {
    Tensor grad = empty(mb.output.sizes(), mb.output.options());
    g.recv(grad, s + 1, tag(m, kGradient))->wait();
    if (mb.output.requires_grad()) mb.output.backward(grad);
  }
  if (!stage_.is_first()) {
    Tensor gin = mb.input.grad();
    sends_.push_back(
        g.send(gin.defined() ? gin.contiguous() : zeros_like(mb.input), s - 1, tag(m, kGradient)));
  }
  mb.input = mb.output = Tensor();  // this micro-batch's activations are no longer needed
  --in_flight_;
}

void ScheduleGPipe::run() {
  for (int m = 0; m < n_microbatches(); ++m) forward(m);
  for (int m = 0; m < n_microbatches(); ++m) backward(m);
}

void Schedule1F1B::run() {
  const int n = n_microbatches();
  const int warmup = std::min(n, stage().num_stages() - stage().stage_index() - 1);
  int f = 0, b = 0;
  for (; f < warmup; ++f) forward(f);
  for (; f < n; ++f, ++b) {
    forward(f);
    backward(b);
  }
  for (; b < n; ++b) backward(b);
}

}  // namespace ember::distributed
