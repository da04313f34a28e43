#pragma once

#include <functional>
#include <vector>

#include "ember/core/autograd_meta.h"

namespace ember::autograd {

// Gradients of `outputs` w.r.t. `inputs` (torch.autograd.grad): returned, not accumulated into
// .grad. `grad_outputs` may be empty for scalar outputs. An input the outputs don't depend on
// gives an error, or an undefined tensor with allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Accumulates gradients of `tensors` into the leaves' .grad (torch.autograd.backward).
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false);

// Runs `callback` once, when the backward pass in progress finishes (DDP waits for its
// all-reduces here). Only valid while a backward runs.
void queue_callback(std::function<void()> callback);

// While alive, backward checks every gradient a node returns and names the op whose backward
// produced a NaN (torch.autograd.detect_anomaly).
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};
bool is_anomaly_enabled();

}  // namespace ember::autograd
