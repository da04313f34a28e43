#pragma once

// torch.distributed.fsdp.ShardedGradScaler: a GradScaler for optimizers that each hold a shard of
// the gradients (ZeroRedundancyOptimizer, either stage). Each rank finds inf/NaN only in its own
// share, so the found-inf flags are summed over the process group before step() and update() read
// them: every rank skips the same steps and backs its scale off alike.
//
//   dist::ShardedGradScaler scaler;
//   scaler.scale(loss).backward();
//   zero.step(scaler);        // unscale, agree on inf, step or skip, broadcast
//   scaler.update();

#include <memory>

#include "ember/distributed/process_group.h"
#include "ember/optim/grad_scaler.h"

namespace ember::distributed {

class ShardedGradScaler : public amp::GradScaler {
 public:
  // GradScaler's arguments; `group`: the default group when null.
  explicit ShardedGradScaler(double init_scale = 65536.0, double growth_factor = 2.0,
                             double backoff_factor = 0.5, int64_t growth_interval = 2000, bool enabled = true,
                             std::shared_ptr<ProcessGroup> group = nullptr);

 protected:
  // One all-reduce of this rank's flags, summed on the scale's device.
  void agree_on_found_inf(std::vector<std::pair<Device, Tensor>>& found_inf_per_device) const override;

 private:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace ember::distributed
