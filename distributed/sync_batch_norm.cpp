#include "ember/distributed/sync_batch_norm.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/normalization.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {

namespace {

// Checks the functional form's arguments (the module has checked its own already).
void check_args(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                const Tensor& bias, const std::shared_ptr<ProcessGroup>& group) {
  const char* op = "sync_batch_norm";
  EMBER_CHECK(group, op, ": the process group is null");
  EMBER_CHECK(x.dim() >= 2, op, ": expected an input [N, C, *] with at least 2 dims, got ", x.sizes());
  EMBER_CHECK(x.is_floating_point(), op, ": expected a floating point input, got ", x.dtype());
  EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must both be given or both be undefined");
  int64_t C = x.size(1);
  for (auto [t, what] : {std::pair{&running_mean, "running_mean"},
                         {&running_var, "running_var"},
                         {&weight, "weight"},
                         {&bias, "bias"}}) {
    if (!t->defined()) continue;
    EMBER_CHECK(t->dim() == 1 && t->size(0) == C && t->is_floating_point() && t->device() == x.device(), op,
                ": expected ", what, " to be a floating point [", C, "] tensor on ", x.device(), ", got ",
                t->dtype(), " ", t->sizes(), " on ", t->device());
  }
}

}  // namespace

Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const std::shared_ptr<ProcessGroup>& group) {
  check_args(x, running_mean, running_var, weight, bias, group);
  const int64_t A = x.size(0), C = x.size(1);
  int64_t B = 1;
  for (int64_t i = 2; i < x.dim(); ++i) B *= x.size(i);
  const int64_t count = A * B;
  const ScalarType cd = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const TensorOptions opts = TensorOptions(cd).device(x.device());
  bool grad = needs_grad({x, weight, bias});
  NoGradGuard no_grad;  // recorded below as one op
  Tensor in = x.contiguous();

  // This rank's [mean, biased var * count, count] per channel, gathered from every rank as
  // [world, 2C + 1] and combined as in Chan et al.'s parallel variance (no cancellation).
  Tensor local = zeros({2 * C + 1}, opts);
  if (count > 0) {
    // invstd with eps = 0 is 1 / sqrt(var).
    Tensor mean = local.narrow(0, 0, C), m2 = local.narrow(0, C, C);
    batch_norm_stats_stub(x.device())(mean, m2, {}, {}, in.view({A, C, B}), 0, 0);
    m2.pow_(-2).mul_(static_cast<double>(count));
    local.narrow(0, 2 * C, 1).fill_(static_cast<double>(count));
  }
  Tensor gathered = empty({group->size(), 2 * C + 1}, opts);
  group->all_gather_into_tensor(gathered, local)->wait();
  Tensor counts = gathered.narrow(1, 2 * C, 1), means = gathered.narrow(1, 0, C);
  Tensor n = counts.sum();
  // Only a rank with at most one value of its own needs the total on the host to check it.
  if (count <= 1) {
    EMBER_CHECK(n.item<double>() > 1,
                "sync_batch_norm: expected more than 1 value per channel when training, got ",
                n.item<int64_t>(), " over the group (input ", x.sizes(), " on rank ", group->rank(), ")");
  }
  Tensor mean = (means * counts).sum({0}) / n;
  Tensor m2 = (gathered.narrow(1, C, C) + counts * (means - mean).square()).sum({0});
  Tensor invstd = (m2 / n + eps).rsqrt();
  if (running_mean.defined()) {
    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype()), momentum);
    running_var.mul_(1 - momentum).add_((m2 / (n - 1)).to(running_var.dtype()), momentum);
  }

  Tensor out = empty(x.sizes(), x.options());
  if (count > 0)
    batch_norm_elemt_stub(x.device())(out.view({A, C, B}), in.view({A, C, B}), mean, invstd,
                                      weight.defined() ? weight.contiguous() : weight,
                                      bias.defined() ? bias.contiguous() : bias, Tensor(), false);
  if (!grad) return out;

  SavedTensor sx(x, false), sw(weight, false), smean(mean, false), sinvstd(invstd, false), sn(n, false);
  ScalarType bias_dtype = bias.defined() ? bias.dtype() : cd;
  record(
      "sync_batch_norm", {x, weight, bias}, {out},
      [sx, sw, smean, sinvstd, sn, group, A, C, B, bias_dtype](const GradContext& g) -> std::vector<Tensor> {
        NoGradGuard no_grad;  // the all-reduce below is not differentiable
        Tensor x = g(sx), w = g(sw);
        if (w.defined()) w = w.contiguous();
        Tensor x3 = x.contiguous().view({A, C, B}), gy = g.grad().to(x.dtype()).contiguous().view({A, C, B});
        Tensor mean = g(smean), invstd = g(sinvstd);
        // [sum(dy), sum(dy * (x - mean))] per channel: this rank's, then the group's.
        Tensor sums = empty({2 * C}, mean.options());
        Tensor dw = g.needs(1) ? empty({C}, w.options()) : Tensor();
        Tensor db = g.needs(2) ? empty({C}, mean.options().dtype(bias_dtype)) : Tensor();
        if (x.numel() > 0) {
          batch_norm_backward_reduce_stub(x.device())(sums.narrow(0, 0, C), sums.narrow(0, C, C), dw, db, gy,
                                                      x3, mean, invstd, w, Tensor(), false);
        } else {
          sums.zero_();
          for (Tensor* t : {&dw, &db})
            if (t->defined()) t->zero_();
        }
        Tensor dx;
        if (g.needs(0)) {
          group->all_reduce(sums)->wait();
          sums.div_(g(sn));
          dx = empty(x.sizes(), x.options());
          if (x.numel() > 0)
            batch_norm_backward_elemt_stub(x.device())(dx.view({A, C, B}), gy, x3, mean, invstd, w, Tensor(),
                                                       sums.narrow(0, 0, C), sums.narrow(0, C, C), 1.0,
                                                       false);
        }
        return {dx, dw, db};
      });
  return out;
}

std::optional<Tensor> ProcessGroupBatchNormSync::forward(nn::BatchNormImplBase& bn, const Tensor& input) {
  std::shared_ptr<ProcessGroup> g = group;
  if (!g) {
    EMBER_CHECK(is_initialized(), bn.name(),
                ": training needs a process group: call distributed::init_process_group first, or pass one "
                "to the layer");
    g = default_group();
  }
  if (g->size() == 1) return std::nullopt;
  const double momentum = bn.count_batch();
  return sync_batch_norm(input, bn.running_mean, bn.running_var, bn.weight, bn.bias, momentum,
                         bn.options.eps(), g);
}

}  // namespace ember::distributed

namespace ember::nn {

SyncBatchNormImpl::SyncBatchNormImpl(const BatchNormOptions& options,
                                     std::shared_ptr<distributed::ProcessGroup> process_group)
    : BatchNormImplBase("SyncBatchNorm", options) {
  sync = std::make_shared<distributed::ProcessGroupBatchNormSync>(std::move(process_group));
}

Tensor SyncBatchNormImpl::forward(const Tensor& input) {
  EMBER_CHECK(input.dim() >= 2, "SyncBatchNorm: expected at least 2D input, got ", input.dim(), "D input ",
              input.sizes());
  return batch_norm_forward(input);
}

SyncBatchNorm convert_sync_batchnorm(const BatchNormImplBase& bn,
                                     std::shared_ptr<distributed::ProcessGroup> process_group) {
  SyncBatchNorm sync(bn.options, std::move(process_group));
  if (const Tensor& t = bn.weight.defined() ? bn.weight : bn.running_mean; t.defined())
    sync->to(t.device(), t.dtype());
  sync->load_state_dict(bn.state_dict());
  for (auto [to, from] : {std::pair{&sync->weight, &bn.weight}, {&sync->bias, &bn.bias}})
    if (to->defined()) to->requires_grad_(from->requires_grad());
  sync->train(bn.is_training());
  return sync;
}

int64_t convert_sync_batchnorm(Module& module, std::shared_ptr<distributed::ProcessGroup> process_group) {
  auto sync = std::make_shared<distributed::ProcessGroupBatchNormSync>(std::move(process_group));
  int64_t converted = 0;
  module.apply([&](Module& m) {
    if (auto* bn = dynamic_cast<BatchNormImplBase*>(&m)) {
      bn->sync = sync;
      ++converted;
    }
  });
  return converted;
}

}  // namespace ember::nn
