#pragma once

// torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO stage 1): each rank keeps the optimizer
// state of its own share of the parameters only, steps that share, and broadcasts it to the
// other ranks, so the state's memory per rank is about 1/world of an ordinary optimizer's.
//
//   dist::DistributedDataParallel ddp(model);            // averages the gradients
//   dist::ZeroRedundancyOptimizer opt(ddp->parameters(),
//                                     dist::optimizer_factory<optim::AdamW>(optim::AdamWOptions(1e-3)));
//   opt.zero_grad(); loss(ddp(x)).backward(); opt.step();
//
// Stage 2 (ZeroOptions().stage(2)) shards the gradients too: the model is not wrapped in DDP, and
// the gradients go, in buckets as backward produces them, onto the ranks that own their
// parameters (reduces); the other ranks drop theirs (distributed/sharded_gradients.h). Each backward reduces,
// so a second backward before step() or zero_grad() is an error: accumulate by summing losses.
//
// Every rank passes the same parameters in the same order and calls step(),
// consolidate_state_dict() and load_state_dict() together.

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ember/core/state_dict.h"
#include "ember/distributed/process_group.h"
#include "ember/distributed/sharded_grad_scaler.h"
#include "ember/distributed/sharded_gradients.h"
#include "ember/nn/options.h"
#include "ember/optim/optimizer.h"

namespace ember::distributed {

// Builds the local optimizer over this rank's share: the same groups (and group options), each
// holding only the parameters the rank owns (possibly none).
using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::OptimizerParamGroup>)>;

// The factory of optimizer class O with these defaults (PyTorch's optimizer_class and **defaults).
template <class O, class Options>
OptimizerFactory optimizer_factory(Options defaults) {
  return [defaults](std::vector<optim::OptimizerParamGroup> groups) {
    return std::make_unique<O>(std::move(groups), defaults);
  };
}

// PyTorch's greedy partition: within each group, parameters largest first (a stable sort), each
// to the rank with the fewest elements so far, counted over all groups. Returns the owner of each
// parameter, indexed like the groups' parameters one after the other.
std::vector<int> partition_parameters(const std::vector<optim::OptimizerParamGroup>& groups, int world_size);

struct ZeroOptions {
  // 1: optimizer state sharded (gradients averaged beforehand, e.g. by DDP); 2: gradients too.
  EMBER_ARG(int, stage) = 1;
  // Stage 2: the gradients are reduced in buckets of about this many MiB, as DDP's.
  EMBER_ARG(double, bucket_cap_mb) = 25;
  // PyTorch's parameters_as_bucket_view: each rank's parameters become views of one buffer
  // (nn::utils::flatten_parameters_, one per dtype), so the step ends with one broadcast per rank
  // instead of one per parameter (and autocast casts a buffer at once).
  EMBER_ARG(bool, parameters_as_bucket_view) = false;
};

class ZeroRedundancyOptimizer {
 public:
  // `group`: the default group when null. Throws when some rank would own no parameter.
  ZeroRedundancyOptimizer(std::vector<optim::OptimizerParamGroup> groups,
                          const OptimizerFactory& make_optimizer,
                          std::shared_ptr<ProcessGroup> group = nullptr, const ZeroOptions& options = {});
  ZeroRedundancyOptimizer(std::vector<Tensor> params, const OptimizerFactory& make_optimizer,
                          std::shared_ptr<ProcessGroup> group = nullptr, const ZeroOptions& options = {});
  ~ZeroRedundancyOptimizer();
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // The local optimizer updates this rank's parameters that have gradients (averaged already by
  // DDP, or at stage 2 by the reduces, which it first waits for); then every parameter is
  // broadcast from its owner.
  Tensor step(const optim::Optimizer::LossClosure& closure = nullptr);
  // The same through a ShardedGradScaler (mixed precision): this rank's gradients are unscaled, the
  // ranks agree on inf/NaN, and every rank steps or skips alike before the broadcast.
  void step(ShardedGradScaler& scaler);
  // Over every parameter, owned or not.
  void zero_grad(bool set_to_none = true);

  // Gathers every rank's optimizer state on rank `to` (a collective: every rank calls it).
  void consolidate_state_dict(int to = 0);
  // On the rank consolidate_state_dict() gathered to, and before the next step() or
  // load_state_dict(): the state dict a single-process optimizer over all the parameters has
  // (the same keys, parameter indices and options).
  StateDict state_dict() const;
  // Takes such a full state dict on every rank; each keeps its own parameters' state.
  void load_state_dict(const StateDict& state_dict);

  // This rank's optimizer (LR schedulers attach to it, on every rank alike).
  optim::Optimizer& optim() { return *local_; }
  const optim::Optimizer& optim() const { return *local_; }
  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }
  // Every group's parameters, in order: the indices state_dict() uses.
  const std::vector<Tensor>& parameters() const { return params_; }
  // The rank that owns each of parameters().
  const std::vector<int>& param_to_rank() const { return param_to_rank_; }

 private:
  // Rank r's parameters as indices into parameters(), in its local optimizer's order.
  std::vector<size_t> owned_by(int r) const;
  void broadcast_params();

  std::shared_ptr<ProcessGroup> group_;
  std::vector<Tensor> params_;
  std::vector<size_t> group_sizes_;
  std::vector<int> param_to_rank_;
  std::unique_ptr<optim::Optimizer> local_;
  std::unique_ptr<detail::ShardedGradients> sharded_;  // stage 2
  std::vector<std::vector<Tensor>> rank_buffers_;      // parameters_as_bucket_view: by owner
  std::optional<StateDict> consolidated_;
};

}  // namespace ember::distributed
