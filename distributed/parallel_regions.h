#pragma once

// The collectives of Megatron-LM's tensor parallelism as autograd ops (its "f" and "g" and their
// gather/scatter pair), so a model whose layers are split over the ranks of a group
// differentiates as the whole model does:
//   copy_to_tensor_parallel_region       f: forward the identity, backward all-reduces (sums)
//   reduce_from_tensor_parallel_region   g: forward all-reduces (sums), backward the identity
//   gather_from_tensor_parallel_region   forward all-gathers along the last dim, backward keeps
//                                        this rank's slice of the gradient
//   scatter_to_tensor_parallel_region    forward keeps this rank's slice of the last dim,
//                                        backward all-gathers the gradient
// `group` null means the default group. Every rank of the group calls them, and runs their
// backwards, together and in the same order.

#include <memory>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

Tensor copy_to_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group = nullptr);
Tensor reduce_from_tensor_parallel_region(const Tensor& x,
                                          const std::shared_ptr<ProcessGroup>& group = nullptr);
Tensor gather_from_tensor_parallel_region(const Tensor& x,
                                          const std::shared_ptr<ProcessGroup>& group = nullptr);
// The last dim must divide evenly by the group's size.
Tensor scatter_to_tensor_parallel_region(const Tensor& x,
                                         const std::shared_ptr<ProcessGroup>& group = nullptr);

// Megatron-LM's sequence parallelism: between the tensor-parallel blocks the activations are split
// along the sequence dim over the group, so LayerNorm, dropout and the residual adds each work on
// 1/W of the tokens, and their activations take 1/W of the memory:
//   gather_from_sequence_parallel_region        forward all-gathers along `dim`, backward
//                                               reduce-scatters (sums, then this rank's slice)
//   reduce_scatter_to_sequence_parallel_region  forward reduce-scatters along `dim`, backward
//                                               all-gathers
//   scatter_to_sequence_parallel_region         forward keeps this rank's slice along `dim`,
//                                               backward all-gathers
// A gather then a reduce-scatter moves the bytes of the all-reduce they replace. `dim` must divide
// evenly by the group's size (after the gather: its size times the group's).
Tensor gather_from_sequence_parallel_region(const Tensor& x, int64_t dim,
                                            const std::shared_ptr<ProcessGroup>& group = nullptr);
Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, int64_t dim,
                                                  const std::shared_ptr<ProcessGroup>& group = nullptr);
Tensor scatter_to_sequence_parallel_region(const Tensor& x, int64_t dim,
                                           const std::shared_ptr<ProcessGroup>& group = nullptr);

// Every rank's x (all of one shape) concatenated along `dim` in rank order; not differentiable.
Tensor all_gather_along(const Tensor& x, int64_t dim, const std::shared_ptr<ProcessGroup>& group);

// n / group's size, the size of one rank's shard of n; an error naming `layer` and `what` unless
// n is positive and divides evenly.
int64_t shard_size(const char* layer, const char* what, int64_t n, const ProcessGroup& group);

// The group itself, or the default group for null (an error when none is initialized).
std::shared_ptr<ProcessGroup> group_or_default(const char* op, const std::shared_ptr<ProcessGroup>& group);

}  // namespace ember::distributed
