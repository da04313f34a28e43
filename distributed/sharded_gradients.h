#pragma once

// The gradient half of ZeRO stage 2 (ZeroRedundancyOptimizer with stage 2): the gradients are
// summed onto the ranks that own their parameters (reduces, half the traffic of DDP's
// all-reduce), in buckets as DDP's: parameters in reverse order (about the order backward
// produces their gradients), a bucket of about `bucket_cap_bytes` starting as soon as all its
// gradients are there, one reduce per owner in it over the owner's gradients flattened. Every
// other rank drops its copies as the bucket starts, so a rank ends backward holding about
// 1/world of the gradients. The owner's gradient is the average over the ranks, as DDP leaves it.
//
// Every rank must produce gradients for the same parameters (the flattened buffers match).

#include <memory>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/distributed/process_group.h"

namespace ember::distributed::detail {

class ShardedGradients {
 public:
  // owner[i]: the rank that owns params[i]. Hooks go on the parameters; they do nothing once this
  // object is gone.
  ShardedGradients(std::vector<Tensor> params, std::vector<int> owner, std::shared_ptr<ProcessGroup> group,
                   int64_t bucket_cap_bytes);
  ShardedGradients(const ShardedGradients&) = delete;
  ShardedGradients& operator=(const ShardedGradients&) = delete;

  // Starts the buckets not started yet (those with a parameter that got no gradient in this
  // backward, which are left out), waits for the reduces and finishes them: after it, the owned gradients
  // hold the averages and the others are dropped. The next backward may reduce again.
  void finish();
  // The parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_indices() const;
  // Reduces started since construction (one per owner in each bucket, per backward).
  int64_t reduces_started() const { return reduces_started_; }

 private:
  struct Segment {  // one owner's gradients in a bucket
    int owner;
    std::vector<size_t> params;
    std::vector<size_t> sent;  // those that had a gradient, in the order of `buffer`
    Tensor buffer;
    bool in_place = false;  // `buffer` is the one gradient itself
    std::shared_ptr<Work> work;
  };
  struct Bucket {
    std::vector<size_t> params;
    std::vector<Segment> segments;
    size_t pending = 0;  // parameters whose gradient is not there yet in this backward
  };
  void on_gradient(size_t i);
  void launch(Bucket& b);
  void complete(Segment& s);

  std::vector<Tensor> params_;
  std::vector<int> owner_;
  std::shared_ptr<ProcessGroup> group_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  size_t next_bucket_ = 0;         // the first bucket not started in this backward
  std::vector<char> reduced_;      // per parameter: its gradient arrived since the last finish()
  int64_t reduces_started_ = 0;
  std::shared_ptr<ShardedGradients*> self_;  // the hooks reach this object through it
};

}  // namespace ember::distributed::detail
