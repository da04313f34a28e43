#include "ember/distributed/sharded_gradients.h"

#include <algorithm>

#include "ember/core/grad_mode.h"

namespace ember::distributed::detail {

ShardedGradients::ShardedGradients(std::vector<Tensor> params, std::vector<int> owner,
                                   std::shared_ptr<ProcessGroup> group)
    : params_(std::move(params)),
      owner_(std::move(owner)),
      group_(std::move(group)),
      reduced_(params_.size(), 0),
      self_(std::make_shared<ShardedGradients*>(this)) {
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].register_post_accumulate_grad_hook(
        [self = std::weak_ptr<ShardedGradients*>(self_), i](const Tensor&) {
          if (auto s = self.lock()) (*s)->on_gradient(i);
        });
}

void ShardedGradients::on_gradient(size_t i) {
  // A second backward before the step would reduce the owner's averaged gradient again.
  EMBER_CHECK(!reduced_[i], "ZeroRedundancyOptimizer (stage 2): parameter ", i,
              " got a gradient twice before step(); each backward reduces the gradients, so accumulate by ",
              "summing the losses, or call step() or zero_grad() between backwards");
  reduced_[i] = 1;
  NoGradGuard no_grad;
  const Tensor grad = params_[i].grad();
  Tensor buffer = grad.is_contiguous() ? grad : grad.contiguous();
  pending_.push_back({i, buffer, group_->reduce(buffer, owner_[i], ReduceOp::SUM)});
  // Reduces that have finished by now give their memory back before backward ends.
  auto done = std::stable_partition(pending_.begin(), pending_.end(),
                                    [](const Pending& p) { return !p.work->is_completed(); });
  for (auto it = done; it != pending_.end(); ++it) complete(*it);
  pending_.erase(done, pending_.end());
}

void ShardedGradients::complete(Pending& p) {
  p.work->wait();
  const Tensor& param = params_[p.param];
  if (owner_[p.param] != group_->rank()) {
    param.set_grad(Tensor());
    return;
  }
  const Tensor grad = param.grad();
  if (!p.buffer.is_same(grad)) grad.copy_(p.buffer);
  grad.div_(group_->size());
}

void ShardedGradients::finish() {
  NoGradGuard no_grad;
  for (Pending& p : pending_) complete(p);
  pending_.clear();
  std::fill(reduced_.begin(), reduced_.end(), 0);
}

}  // namespace ember::distributed::detail
