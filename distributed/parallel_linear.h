#pragma once

// Megatron-LM's tensor-parallel linear layers: a Linear(in, out) split over the ranks of a group.
// - ColumnParallelLinear splits the output features: rank r holds rows [r * out/W, (r+1) * out/W)
//   of the weight (and bias) and computes that slice of y; with gather_output the slices are
//   all-gathered into the whole y.
// - RowParallelLinear splits the input features: rank r holds those columns of the weight, takes
//   its slice of x (input_is_parallel: x is already that slice) and computes a partial y; the
//   partials are summed over the group, then the (whole) bias is added.
// The pair makes a parallel MLP with one all-reduce forward and one backward:
//
//   distributed::ColumnParallelLinear up(distributed::ColumnParallelLinearOptions(768, 3072)
//                                            .gather_output(false));
//   distributed::RowParallelLinear down(distributed::RowParallelLinearOptions(3072, 768)
//                                           .input_is_parallel(true));
//   Tensor y = down(gelu(up(x)));   // x and y whole on every rank
//
// With sequence_parallel (Megatron-LM's sequence parallelism, parallel_regions.h), x outside the
// pair is split along `sequence_dim` over the group: ColumnParallelLinear all-gathers it first
// (its backward reduce-scatters), RowParallelLinear reduce-scatters its output instead of
// all-reducing it and adds its bias to this rank's slice (the bias's gradient then summed over the
// group):
//
//   Tensor y = down(gelu(up(x)));   // x and y [N, L / W, E] with sequence_dim 1
//
// Initialization draws the whole layer's weight and bias (as nn::Linear does, from the same RNG
// state on every rank) and keeps the shard, so the split model starts as the single-process one.
// Its state_dict holds the shards; tensor_parallel_state.h converts to and from the whole one.

#include <memory>

#include "ember/distributed/process_group.h"
#include "ember/distributed/tensor_parallel_state.h"
#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::distributed {

struct ColumnParallelLinearOptions {
  ColumnParallelLinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  EMBER_ARG(int64_t, in_features);
  EMBER_ARG(int64_t, out_features);  // the whole layer's; divisible by the group's size
  EMBER_ARG(bool, bias) = true;
  EMBER_ARG(bool, gather_output) = true;
  // x comes split along sequence_dim over the group (see above).
  EMBER_ARG(bool, sequence_parallel) = false;
  EMBER_ARG(int64_t, sequence_dim) = 0;
  EMBER_ARG(std::shared_ptr<ProcessGroup>, group);  // null: the default group
};

class ColumnParallelLinearImpl : public nn::Module, public TensorParallelShards {
 public:
  explicit ColumnParallelLinearImpl(const ColumnParallelLinearOptions& options);
  // x [*, in_features] (whole, or this rank's sequence slice with sequence_parallel) -> [*, out_features],
  // or [*, out_features / W] without gather_output, over the whole sequence.
  Tensor forward(const Tensor& x);
  std::optional<ShardSpec> shard_spec(const std::string& name) const override;
  const std::shared_ptr<ProcessGroup>& shard_group() const override { return group_; }
  std::string extra_repr() const override;

  ColumnParallelLinearOptions options;
  Tensor weight;  // [out_features / W, in_features]
  Tensor bias;    // [out_features / W]; undefined without bias

 private:
  std::shared_ptr<ProcessGroup> group_;
};
EMBER_MODULE(ColumnParallelLinear);

struct RowParallelLinearOptions {
  RowParallelLinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  EMBER_ARG(int64_t, in_features);  // the whole layer's; divisible by the group's size
  EMBER_ARG(int64_t, out_features);
  EMBER_ARG(bool, bias) = true;
  EMBER_ARG(bool, input_is_parallel) = false;
  // The output is left split along sequence_dim over the group (needs input_is_parallel).
  EMBER_ARG(bool, sequence_parallel) = false;
  EMBER_ARG(int64_t, sequence_dim) = 0;
  EMBER_ARG(std::shared_ptr<ProcessGroup>, group);  // null: the default group
};

class RowParallelLinearImpl : public nn::Module, public TensorParallelShards {
 public:
  explicit RowParallelLinearImpl(const RowParallelLinearOptions& options);
  // x [*, in_features] (whole), or [*, in_features / W] with input_is_parallel -> [*, out_features]
  // (with sequence_parallel, this rank's slice along sequence_dim).
  Tensor forward(const Tensor& x);
  std::optional<ShardSpec> shard_spec(const std::string& name) const override;
  const std::shared_ptr<ProcessGroup>& shard_group() const override { return group_; }
  std::string extra_repr() const override;

  RowParallelLinearOptions options;
  Tensor weight;  // [out_features, in_features / W]
  Tensor bias;    // [out_features], whole on every rank; undefined without bias

 private:
  std::shared_ptr<ProcessGroup> group_;
};
EMBER_MODULE(RowParallelLinear);

}  // namespace ember::distributed
