#include "ember/distributed/sharded_grad_scaler.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {

ShardedGradScaler::ShardedGradScaler(double init_scale, double growth_factor, double backoff_factor,
                                     int64_t growth_interval, bool enabled,
                                     std::shared_ptr<ProcessGroup> group)
    : amp::GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled),
      group_(group ? std::move(group) : default_group()) {}

void ShardedGradScaler::agree_on_found_inf(
    std::vector<std::pair<Device, Tensor>>& found_inf_per_device) const {
  NoGradGuard no_grad;
  // Every rank contributes one flag, whatever devices (or none) its gradients are on.
  const Device device = scale_device();
  Tensor total = zeros({}, TensorOptions(kFloat32).device(device));
  for (const auto& [d, found] : found_inf_per_device) total.add_(found.to(device));
  group_->all_reduce(total, ReduceOp::SUM)->wait();
  found_inf_per_device = {{device, total}};
}

}  // namespace ember::distributed
