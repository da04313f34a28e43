#pragma once

// The gradient half of ZeRO stage 2 (ZeroRedundancyOptimizer with stage 2): as backward finishes
// each parameter's gradient, it is summed onto the rank that owns the parameter (a reduce, half
// the traffic of DDP's all-reduce), and every other rank drops its copy once the reduce is done,
// so a rank ends backward holding about 1/world of the gradients. The owner's gradient is the
// average over the ranks, as DDP leaves it.

#include <memory>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/distributed/process_group.h"

namespace ember::distributed::detail {

class ShardedGradients {
 public:
  // owner[i]: the rank that owns params[i]. Hooks go on the parameters; they do nothing once this
  // object is gone.
  ShardedGradients(std::vector<Tensor> params, std::vector<int> owner, std::shared_ptr<ProcessGroup> group);
  ShardedGradients(const ShardedGradients&) = delete;
  ShardedGradients& operator=(const ShardedGradients&) = delete;

  // Waits for the reduces in flight and finishes them: after it, the owned gradients hold the
  // averages and the others are dropped. The next backward may reduce again.
  void finish();

 private:
  struct Pending {
    size_t param;
    Tensor buffer;  // the gradient, or its contiguous copy
    std::shared_ptr<Work> work;
  };
  void on_gradient(size_t i);
  void complete(Pending& p);

  std::vector<Tensor> params_;
  std::vector<int> owner_;
  std::shared_ptr<ProcessGroup> group_;
  std::vector<char> reduced_;  // per parameter: reduced since the last finish()
  std::vector<Pending> pending_;
  std::shared_ptr<ShardedGradients*> self_;  // the hooks reach this object through it
};

}  // namespace ember::distributed::detail
