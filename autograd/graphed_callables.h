#pragma once

// torch.cuda.make_graphed_callables: a function's forward and backward, each captured into a CUDA
// graph (cuda/graph.h), usable inside an ordinary eager training loop. It lives with autograd
// because the graphed function records one autograd node, whose backward replays the second graph.
#include <functional>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::cuda {

// What make_graphed_callables takes and returns: CUDA tensors in, CUDA tensors out.
using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Captures fn(sample_args) and the gradients of its floating outputs with respect to the sample
// arguments that require grad and to `params` (its parameters), after `warmup` eager iterations
// (which neither step nor accumulate into .grad). The two graphs share one memory pool.
//
// The returned function takes arguments of the samples' shapes, dtypes and requires_grad: it
// copies them into the capture's inputs, replays the forward and returns copies of its outputs,
// recorded as one autograd node. Its backward copies the output gradients in, replays the
// backward graph, and hands the argument and parameter gradients to autograd (which accumulates
// them into .grad as usual). fn must compute only from its inputs and `params`: other tensors are
// read where they were at capture. As in PyTorch, each call's backward must run before the next
// call (both reuse the capture's activations), and dropout draws new numbers each replay.
TensorFn make_graphed_callables(TensorFn fn, const std::vector<Tensor>& sample_args,
                                const std::vector<Tensor>& params, int warmup = 3);

}  // namespace ember::cuda
