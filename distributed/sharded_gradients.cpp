#include "ember/distributed/sharded_gradients.h"

#include <algorithm>

#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/reducer.h"

namespace ember::distributed::detail {

ShardedGradients::ShardedGradients(std::vector<Tensor> params, std::vector<int> owner,
                                   std::shared_ptr<ProcessGroup> group, int64_t bucket_cap_bytes)
    : params_(std::move(params)),
      owner_(std::move(owner)),
      group_(std::move(group)),
      bucket_of_(params_.size()),
      reduced_(params_.size(), 0),
      self_(std::make_shared<ShardedGradients*>(this)) {
  const std::vector<Tensor> reversed(params_.rbegin(), params_.rend());
  for (std::vector<size_t>& indices : compute_bucket_assignment_by_size(reversed, {bucket_cap_bytes})) {
    Bucket& b = buckets_.emplace_back();
    for (size_t r : indices) {
      const size_t i = params_.size() - 1 - r;
      b.params.push_back(i);
      bucket_of_[i] = buckets_.size() - 1;
      auto seg = std::find_if(b.segments.begin(), b.segments.end(),
                              [&](const Segment& s) { return s.owner == owner_[i]; });
      if (seg == b.segments.end())
        seg = b.segments.insert(b.segments.end(), Segment{owner_[i], {}, {}, {}, false, {}});
      seg->params.push_back(i);
    }
    b.pending = b.params.size();
  }
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].register_post_accumulate_grad_hook(
        [self = std::weak_ptr<ShardedGradients*>(self_), i](const Tensor&) {
          if (auto s = self.lock()) (*s)->on_gradient(i);
        });
}

std::vector<std::vector<size_t>> ShardedGradients::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void ShardedGradients::on_gradient(size_t i) {
  // A second backward before the step would reduce the owner's averaged gradient again.
  EMBER_CHECK(!reduced_[i], "ZeroRedundancyOptimizer (stage 2): parameter ", i,
              " got a gradient twice before step(); each backward reduces the gradients, so accumulate by ",
              "summing the losses, or call step() or zero_grad() between backwards");
  reduced_[i] = 1;
  --buckets_[bucket_of_[i]].pending;
  // Buckets start in index order on every rank, so the reduces pair up.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0)
    launch(buckets_[next_bucket_++]);
  // Reduces that have finished by now give their memory back before backward ends.
  for (size_t b = 0; b < next_bucket_; ++b)
    for (Segment& s : buckets_[b].segments)
      if (s.work && s.work->is_completed()) complete(s);
}

void ShardedGradients::launch(Bucket& b) {
  NoGradGuard no_grad;
  for (Segment& s : b.segments) {
    std::vector<Tensor> flat;
    s.sent.clear();
    for (size_t i : s.params) {
      // Only gradients this backward produced: the same parameters on every rank, so the buffers
      // match (a gradient kept from before, e.g. by zero_grad(false), would not be on all ranks).
      if (!reduced_[i]) continue;
      const Tensor grad = params_[i].grad();
      flat.push_back(grad.reshape({-1}));
      s.sent.push_back(i);
      if (s.owner != group_->rank()) params_[i].set_grad(Tensor());  // the buffer holds it now
    }
    if (flat.empty()) continue;
    // A lone contiguous gradient is reduced in place; otherwise the segment's are copied into one buffer.
    s.in_place = flat.size() == 1 && flat[0].is_contiguous();
    s.buffer = s.in_place ? flat[0] : cat(flat);
    s.work = group_->reduce(s.buffer, s.owner, ReduceOp::SUM);
    ++reduces_started_;
  }
}

void ShardedGradients::complete(Segment& s) {
  s.work->wait();
  s.work.reset();
  if (s.owner == group_->rank()) {
    s.buffer.div_(group_->size());
    int64_t offset = 0;
    for (size_t i : s.sent) {
      const Tensor grad = params_[i].grad();
      if (!s.in_place) grad.copy_(s.buffer.narrow(0, offset, grad.numel()).view(grad.sizes()));
      offset += grad.numel();
    }
  }
  s.buffer = Tensor();
}

void ShardedGradients::finish() {
  NoGradGuard no_grad;
  while (next_bucket_ < buckets_.size()) launch(buckets_[next_bucket_++]);
  for (Bucket& b : buckets_) {
    for (Segment& s : b.segments)
      if (s.work) complete(s);
    b.pending = b.params.size();
  }
  next_bucket_ = 0;
  std::fill(reduced_.begin(), reduced_.end(), 0);
}

}  // namespace ember::distributed::detail
