#pragma once

// The gradient reducer behind DistributedDataParallel (PyTorch's c10d::Reducer): a hook on each
// parameter marks it ready when backward has accumulated its gradient; a bucket whose
// parameters are all ready is copied into its flat buffer and its all-reduce starts at once,
// while backward goes on; a callback at the end of backward waits for every bucket and copies
// the averaged gradients back into .grad. Each bucket's copies are one _foreach_copy_ (one
// kernel launch per 48 gradients on CUDA). With gradient_as_bucket_view each .grad becomes a view
// of its bucket when the bucket starts, so later backwards accumulate straight into the buffer and neither
// copy is needed (a .grad set to none is copied in once and pointed at its view again).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

// One bucket of gradients handed to a comm hook (PyTorch's GradBucket).
struct GradBucket {
  size_t index = 0;  // buckets start in index order, the same on every rank
  Tensor buffer;     // flat (1-D): the gradients of `parameters`, one after the other
  std::vector<Tensor> parameters;
  bool is_last = false;
};

// What a comm hook started: once `work` has been waited for, `then` (when set) finishes the
// job. Afterwards the bucket's buffer must hold the gradients averaged over the ranks.
struct CommWork {
  std::shared_ptr<Work> work;
  std::function<void()> then;
};

// Starts the reduction of a bucket over `group`, asynchronously (register_comm_hook).
using CommHook = std::function<CommWork(ProcessGroup& group, GradBucket& bucket)>;

// The built-in comm hooks (torch.distributed.algorithms.ddp_comm_hooks.default_hooks).
namespace default_hooks {
// all_reduce with AVG: what DDP does without a hook.
CommWork allreduce_hook(ProcessGroup& group, GradBucket& bucket);
// Cast the bucket to float16 / bfloat16, divide by the world size, all_reduce, cast back: half
// the bytes on the wire, at half precision.
CommWork fp16_compress_hook(ProcessGroup& group, GradBucket& bucket);
CommWork bf16_compress_hook(ProcessGroup& group, GradBucket& bucket);
}  // namespace default_hooks

// Splits `tensors` (taken in the order given) into buckets of one dtype and device each: a
// bucket closes once it holds at least its limit in bytes; each dtype and device uses
// `bucket_size_limits` in turn and its last entry from then on. Returns indices into `tensors`,
// buckets ordered by their first tensor (PyTorch's compute_bucket_assignment_by_size).
std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(
    const std::vector<Tensor>& tensors, const std::vector<int64_t>& bucket_size_limits);

class Reducer {
 public:
  // `params` require grad, are leaves, and are named by `names` in errors; `buckets` holds
  // indices into `params` and covers each one exactly once.
  Reducer(std::vector<Tensor> params, std::vector<std::string> names,
          std::vector<std::vector<size_t>> buckets, std::shared_ptr<ProcessGroup> group,
          bool find_unused_parameters, bool gradient_as_bucket_view = false);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called after each forward. With `sync`, the next backward reduces the gradients (and, with
  // find_unused_parameters, the parameters that `outputs` do not depend on count as ready);
  // without it, backward only accumulates them locally (no_sync).
  void prepare_for_backward(bool sync, const std::vector<Tensor>& outputs);
  void register_comm_hook(CommHook hook);
  // The parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_indices() const;

 private:
  struct Bucket {
    std::vector<size_t> params;
    Tensor buffer;
    std::vector<Tensor> views;  // of `buffer`, one per parameter, shaped (and if dense strided) like it
    size_t pending = 0;         // parameters not yet ready in this backward
    CommWork work;
  };

  void autograd_hook(size_t param);
  void mark_ready(size_t param);
  // Copies the bucket's gradients into its buffer (each .grad then points at its view, with
  // gradient_as_bucket_view); returns the positions in the bucket of the parameters without one.
  std::vector<size_t> copy_into_buffer(Bucket& bucket);
  void launch(size_t bucket);
  void finalize_backward();
  // Waits for the buckets started in this backward; returns the parameters never marked ready.
  std::vector<size_t> wait_launched();
  void reset();

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::shared_ptr<ProcessGroup> group_;
  bool find_unused_;
  bool grad_as_view_;
  CommHook hook_;

  // Per iteration.
  bool expect_hooks_ = false;  // prepare_for_backward(sync) ran: the next backward reduces
  bool in_backward_ = false;   // a hook of this backward ran and queued finalize_backward
  std::vector<char> ready_;
  size_t next_bucket_ = 0;  // the first bucket not started yet
  std::vector<size_t> unused_;
  Tensor used_;  // find_unused_parameters: 1 per parameter this rank used, summed over ranks
  std::shared_ptr<Work> used_work_;

  // The hooks on the parameters outlive the reducer: they reach it through this.
  std::shared_ptr<Reducer*> self_;
};

}  // namespace ember::distributed
