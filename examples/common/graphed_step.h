#pragma once

// A trainer's step replayed from CUDA graphs (--cuda-graphs): the step (forward, backward,
// clipping, GradScaler, fused optimizer) is captured once per input shape and then replayed,
// one launch instead of hundreds. What changes between steps outside the step's tensors must
// happen outside it: the LR scheduler steps after the call (fused optimizers read the rate from
// a device tensor the scheduler writes), the data is copied into the capture's static inputs.
//
// The first `warmup` calls of each shape run eagerly (lazy state, plan choices), the next
// captures on static copies of its inputs and replays; later calls copy their inputs in and
// replay. The returned loss is the capture's tensor, which the next replay overwrites: read it
// (or add it up, as EpochMeter does) before the next call. Beyond `max_graphs` shapes, steps run
// eagerly. Each graph keeps its own memory pool.
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <ember/cuda/graph.h>
#include <ember/ember.h>

namespace ember::examples {

class GraphedStep {
 public:
  using Step = std::function<Tensor(const std::vector<Tensor>& inputs)>;

  // Disabled, it only calls `step`.
  GraphedStep(Step step, bool enabled, int warmup = 3, size_t max_graphs = 8);
  Tensor operator()(const std::vector<Tensor>& inputs);
  // Graphs captured so far, and steps replayed.
  size_t graphs() const;
  int64_t replays() const { return replays_; }

 private:
  struct Captured {
    int eager_calls = 0;
    std::vector<Tensor> inputs;  // static: each call's inputs are copied in
    Tensor loss;
    std::unique_ptr<cuda::CUDAGraph> graph;
  };

  Step step_;
  bool enabled_;
  int warmup_;
  size_t max_graphs_;
  std::map<std::vector<int64_t>, Captured> by_shape_;  // keyed by every input's sizes and dtype
  int64_t replays_ = 0;
};

}  // namespace ember::examples
