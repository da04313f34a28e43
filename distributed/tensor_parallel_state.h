#pragma once

// A tensor-parallel model's state as one whole model's: the parallel layers (parallel_linear.h,
// vocab_parallel.h) hold shards of a whole layer's parameters, and these functions move between
// the shards and one full state dict, so a model trained on N ranks saves a checkpoint that a
// single process (or M ranks) loads.
//
//   distributed::load_full_state_dict(*model, full);   // each rank takes its shards
//   StateDict whole = distributed::full_state_dict(*model);  // every rank gets the whole

#include <memory>
#include <optional>
#include <string>

#include "ember/core/state_dict.h"
#include "ember/distributed/process_group.h"
#include "ember/nn/module.h"

namespace ember::distributed {

// How a parameter is split: along `dim`, as `blocks` equal blocks (a packed q, k, v projection
// has 3) each split evenly over the ranks; rank r holds its slice of every block, in block order.
struct ShardSpec {
  int64_t dim = 0;
  int64_t blocks = 1;
};

// Implemented by a module whose own parameters are split over the ranks of a group.
class TensorParallelShards {
 public:
  virtual ~TensorParallelShards() = default;
  // How parameter `name` (one of the module's own) is split, or nullopt when every rank holds all
  // of it.
  virtual std::optional<ShardSpec> shard_spec(const std::string& name) const = 0;
  virtual const std::shared_ptr<ProcessGroup>& shard_group() const = 0;
};

// Copies each parameter and buffer of `model` from `full` (keys as the whole model's
// state_dict): a sharded parameter takes this rank's slice. Every key must be present with the
// whole shape; keys of `full` the model lacks are an error.
void load_full_state_dict(nn::Module& model, const OrderedDict<Tensor>& full);

// The whole model's state dict: sharded parameters all-gathered over their groups (every rank
// calls it together), the rest as they are.
OrderedDict<Tensor> full_state_dict(nn::Module& model);

}  // namespace ember::distributed
