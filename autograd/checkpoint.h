#pragma once

// Activation checkpointing, as torch.utils.checkpoint.checkpoint(fn, *inputs, use_reentrant=False):
// the forward of `fn` keeps none of the tensors its ops save for backward, and backward runs `fn`
// again to get them. Memory for time: a checkpointed region holds only its inputs between the
// forward and the backward, at the cost of a second forward.
//   x = autograd::checkpoint([&](const Tensor& t) { return layer(t); }, x);
// See docs/checkpointing.md; nn/checkpoint.h has checkpoint_sequential.

#include <functional>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

struct CheckpointOptions {
  // Restores the default generators' states (CPU and CUDA) of the forward around the
  // recomputation, so random ops such as dropout draw the same numbers again.
  bool preserve_rng_state = true;
};

using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs fn(inputs) and returns its outputs, recorded so that gradients reach the inputs that
// require grad and every tensor fn uses from elsewhere (parameters), as without checkpointing.
// Each saved tensor of fn's ops becomes a placeholder; the first backward that needs one reruns
// fn (grad mode on, the forward's RNG states) on the same inputs and fills them all. So fn must
// do the same ops when run again, and what it captures must outlive the backward. Without grad
// mode it just runs fn. Nests; works with retain_graph (the recomputed tensors then stay until
// the graph is freed) and create_graph.
std::vector<Tensor> checkpoint(CheckpointFunction fn, const std::vector<Tensor>& inputs,
                               CheckpointOptions options = {});
// One tensor in, one out.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  CheckpointOptions options = {});

}  // namespace ember::autograd
