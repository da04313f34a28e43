#pragma once

// torch.nn.parallel.DistributedDataParallel: wraps a module so that backward averages the
// gradients over the ranks of a process group, overlapping the all-reduces with backward.
//
//   dist::init_process_group("gloo");
//   dist::DistributedDataParallel ddp(model);           // broadcasts rank 0's parameters
//   optim::SGD opt(ddp->parameters(), 0.1);
//   auto loss = mse_loss(ddp(x), y);                    // this rank's share of the batch
//   loss.backward();                                    // .grad: the average over ranks
//   opt.step();
//
// Every rank must build its DDP over the same parameters (checked) and run the same forwards
// and backwards. A parameter that gets no gradient on every rank needs find_unused_parameters;
// one used on some ranks only makes the ranks start different buckets, which cannot be told
// from a hang until the group's timeout.

#include <concepts>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "ember/distributed/process_group.h"
#include "ember/distributed/reducer.h"
#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::distributed {

struct DistributedDataParallelOptions {
  // Gradient buckets hold about this many megabytes (MiB) each; the first one (the last
  // layers') is smaller, so that communication starts early in backward.
  EMBER_ARG(double, bucket_cap_mb) = 25;
  EMBER_ARG(double, first_bucket_cap_mb) = 1;
  // After each forward, find the parameters the outputs do not depend on and count them as
  // ready (their gradients add zeros), at the cost of a graph walk and a small all-reduce with
  // a host sync per iteration.
  EMBER_ARG(bool, find_unused_parameters) = false;
  // Broadcast rank 0's buffers (running statistics) before each forward.
  EMBER_ARG(bool, broadcast_buffers) = true;
  // Each .grad becomes a view of its bucket (from the first backward on): backward accumulates into
  // the bucket, which saves the gradients' memory and the copies in and out of the buckets. zero_grad(false)
  // keeps the views; zero_grad() (set to none) costs one copy into the bucket per backward. A
  // .grad kept across iterations is overwritten by the next backward.
  EMBER_ARG(bool, gradient_as_bucket_view) = false;
};

class DistributedDataParallelBase;

// While alive, backward passes after forwards run under it only accumulate gradients locally;
// the next synchronized backward reduces what accumulated (DistributedDataParallel::no_sync).
class NoSyncGuard {
 public:
  explicit NoSyncGuard(DistributedDataParallelBase& ddp);
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  DistributedDataParallelBase& ddp_;
  bool prev_;
};

// What does not depend on the wrapped module's type. The module is registered as the child
// "module", so parameters and state_dict keys read "module.fc.weight", as in PyTorch.
class DistributedDataParallelBase : public nn::Module {
 public:
  // `group`: the default group when null.
  DistributedDataParallelBase(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                              DistributedDataParallelOptions options);

  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }
  const DistributedDataParallelOptions& options() const { return options_; }
  // Usage: `{ auto guard = ddp->no_sync(); loss(ddp(x1)).backward(); }`.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  // Replaces the all-reduce of each bucket (for example default_hooks::bf16_compress_hook).
  void register_comm_hook(CommHook hook) { reducer_->register_comm_hook(std::move(hook)); }
  // Each bucket's parameters (indices into module()->parameters() of those that require grad),
  // in the order the buckets are reduced.
  std::vector<std::vector<size_t>> bucket_indices() const { return reducer_->bucket_indices(); }

 protected:
  void pre_forward();
  void post_forward(const std::vector<Tensor>& outputs);

 private:
  friend class NoSyncGuard;
  // Forwards reduce (and broadcast buffers) only with grad mode on and outside no_sync, as in PyTorch.
  bool will_sync() const;

  std::shared_ptr<nn::Module> wrapped_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::unique_ptr<Reducer> reducer_;
  bool require_backward_grad_sync_ = true;
};

namespace detail {
// The tensors of a forward's result, where find_unused_parameters starts its search.
inline void collect_tensors(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
inline void collect_tensors(const std::vector<Tensor>& ts, std::vector<Tensor>& out) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <class A, class B>
void collect_tensors(const std::pair<A, B>& p, std::vector<Tensor>& out) {
  collect_tensors(p.first, out);
  collect_tensors(p.second, out);
}
template <class... T>
void collect_tensors(const std::tuple<T...>& t, std::vector<Tensor>& out) {
  std::apply([&](const auto&... x) { (collect_tensors(x, out), ...); }, t);
}
template <class T>
void collect_tensors(const T&, std::vector<Tensor>&) {}  // holds no tensor we can see
}  // namespace detail

template <class M>
class DistributedDataParallelImpl : public DistributedDataParallelBase {
 public:
  explicit DistributedDataParallelImpl(std::shared_ptr<M> module,
                                       std::shared_ptr<ProcessGroup> group = nullptr,
                                       DistributedDataParallelOptions options = {})
      : DistributedDataParallelBase(module, std::move(group), options), module_(std::move(module)) {}

  const std::shared_ptr<M>& module() const { return module_; }

  template <class... Args>
  auto forward(Args&&... args) {
    pre_forward();
    auto out = module_->forward(std::forward<Args>(args)...);
    std::vector<Tensor> tensors;
    detail::collect_tensors(out, tensors);
    post_forward(tensors);
    return out;
  }

 private:
  std::shared_ptr<M> module_;
};

// The holder: `DistributedDataParallel ddp(model, group, options)` with `model` a module
// holder (nn::Linear, a Sequential, an EMBER_MODULE class) or a shared_ptr to a module;
// `ddp(x)` runs the module's forward, `ddp->module()` is the module.
template <class M>
class DistributedDataParallel : public nn::ModuleHolder<DistributedDataParallelImpl<M>> {
 public:
  using Impl = DistributedDataParallelImpl<M>;

  explicit DistributedDataParallel(std::shared_ptr<M> module, std::shared_ptr<ProcessGroup> group = nullptr,
                                   DistributedDataParallelOptions options = {})
      : nn::ModuleHolder<Impl>(std::make_shared<Impl>(std::move(module), std::move(group), options)) {}
  template <nn::AnyModuleHolder H>
  requires std::same_as<typename H::ContainedType, M>
  explicit DistributedDataParallel(const H& module, std::shared_ptr<ProcessGroup> group = nullptr,
                                   DistributedDataParallelOptions options = {})
      : DistributedDataParallel(module.ptr(), std::move(group), options) {}
};

template <nn::AnyModuleHolder H, class... Rest>
DistributedDataParallel(const H&, Rest&&...) -> DistributedDataParallel<typename H::ContainedType>;
template <class M, class... Rest>
DistributedDataParallel(std::shared_ptr<M>, Rest&&...) -> DistributedDataParallel<M>;

}  // namespace ember::distributed
