#pragma once

// SyncBatchNorm (torch.nn.SyncBatchNorm): batch norm whose training statistics are those of the
// whole batch across the processes of a group, as if one process saw every rank's batch.
//
//   auto bn = nn::SyncBatchNorm(nn::BatchNormOptions(64));   // the default group's processes
//
// It lives in distributed/ (nn does not depend on distributed) but in namespace ember::nn, and
// has BatchNorm's parameters, buffers and state_dict keys, so a BatchNorm checkpoint loads into it.

#include <memory>

#include "ember/distributed/process_group.h"
#include "ember/nn/normalization.h"

namespace ember::distributed {

// The training forward of SyncBatchNorm on x [N, C, *]: every rank's per-channel count, mean and
// sum of squared deviations are all-gathered (so batch sizes may differ between ranks, and be 0
// on some) and combined into the global mean and biased variance that normalize x; the running
// stats (when defined) move towards the global mean and unbiased variance. The backward
// all-reduces sum(dy) and sum(dy * (x - mean)) so that dx is the full batch's; the weight and
// bias gradients are this rank's share (DistributedDataParallel sums them). Every rank of the
// group must call it (and its backward) together. Statistics are computed in float32 (float64
// for a float64 x).
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const std::shared_ptr<ProcessGroup>& group);

// A BatchNorm layer's statistics synchronized over `group` by sync_batch_norm (null: the default
// group, which must be initialized by the first training forward); a group of one leaves the
// layer's own forward.
class ProcessGroupBatchNormSync : public nn::BatchNormSync {
 public:
  explicit ProcessGroupBatchNormSync(std::shared_ptr<ProcessGroup> group) : group(std::move(group)) {}
  std::optional<Tensor> forward(nn::BatchNormImplBase& bn, const Tensor& input) override;

  std::shared_ptr<ProcessGroup> group;
};

}  // namespace ember::distributed

namespace ember::nn {

// Input [N, C, *]. In training, synchronizes the statistics over `process_group` (null: the
// default group, which must then be initialized); in eval, or in a group of one, it is
// BatchNorm. Unlike PyTorch, training with no process group is an error rather than a silent
// fall back to per-process statistics.
class SyncBatchNormImpl : public BatchNormImplBase {
 public:
  explicit SyncBatchNormImpl(const BatchNormOptions& options,
                             std::shared_ptr<distributed::ProcessGroup> process_group = nullptr);
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(SyncBatchNorm);

// A SyncBatchNorm with bn's options, and copies of its parameters (requires_grad kept), running
// stats and training mode (PyTorch's convert_sync_batchnorm, for one layer).
SyncBatchNorm convert_sync_batchnorm(const BatchNormImplBase& bn,
                                     std::shared_ptr<distributed::ProcessGroup> process_group = nullptr);

// PyTorch's convert_sync_batchnorm for a whole model, in place: every BatchNorm layer of `module`
// (itself included) synchronizes its training statistics over `process_group` (null: the default
// group), as SyncBatchNorm does; parameters, buffers, names and the model's code stay as they are.
// Returns how many layers it converted.
int64_t convert_sync_batchnorm(Module& module,
                               std::shared_ptr<distributed::ProcessGroup> process_group = nullptr);

}  // namespace ember::nn
