#include "ember/examples/common/graphed_step.h"

namespace ember::examples {
namespace {

// The inputs' dtypes and sizes, each input's list after its rank: what a graph was captured for.
std::vector<int64_t> signature(const std::vector<Tensor>& inputs) {
  std::vector<int64_t> key;
  for (const Tensor& t : inputs) {
    key.push_back(static_cast<int64_t>(t.dtype()));
    key.push_back(t.dim());
    for (int64_t s : t.sizes()) key.push_back(s);
  }
  return key;
}

}  // namespace

GraphedStep::GraphedStep(Step step, bool enabled, int warmup, size_t max_graphs)
    : step_(std::move(step)), enabled_(enabled), warmup_(warmup), max_graphs_(max_graphs) {}

size_t GraphedStep::graphs() const {
  size_t n = 0;
  for (const auto& [key, c] : by_shape_) n += c.graph != nullptr;
  return n;
}

Tensor GraphedStep::operator()(const std::vector<Tensor>& inputs) {
  if (!enabled_) return step_(inputs);
  for (const Tensor& t : inputs)
    EMBER_CHECK(t.is_cuda(), "GraphedStep: CUDA graphs need the step's inputs on a CUDA device, got one on ",
                t.device());
  const std::vector<int64_t> key = signature(inputs);
  auto it = by_shape_.find(key);
  if (it == by_shape_.end()) {
    if (by_shape_.size() >= max_graphs_) return step_(inputs);
    it = by_shape_.emplace(key, Captured{}).first;
  }
  Captured& c = it->second;
  if (!c.graph) {
    if (c.eager_calls++ < warmup_) return step_(inputs);
    for (const Tensor& t : inputs) c.inputs.push_back(t.clone());
    c.graph = std::make_unique<cuda::CUDAGraph>();
    try {
      cuda::graph capture(*c.graph);
      c.loss = step_(c.inputs);
    } catch (...) {
      by_shape_.erase(it);
      throw;
    }
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) c.inputs[i].copy_(inputs[i]);
  }
  c.graph->replay();
  ++replays_;
  return c.loss;
}

}  // namespace ember::examples
