#include "ember/optim/sgd.h"

#include "ember/core/factories.h"
#include "ember/core/ops/fused_optim_functors.h"

namespace ember::optim {

void SGDOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "SGD: invalid learning rate: ", lr_);
  EMBER_CHECK(momentum_ >= 0, "SGD: invalid momentum value: ", momentum_);
  EMBER_CHECK(weight_decay_ >= 0, "SGD: invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (momentum ", momentum_,
              ", dampening ", dampening_, ")");
}

void SGDOptions::visit(OptionVisitor& v) {
  v("lr", lr_);
  v("momentum", momentum_);
  v("dampening", dampening_);
  v("weight_decay", weight_decay_);
  v("nesterov", nesterov_);
  v("maximize", maximize_);
  v("fused", fused_);
}

FusedSgdArgs SGDOptions::args() const {
  return {lr_, momentum_, dampening_, weight_decay_, nesterov_, maximize_, /*is_first_step=*/false};
}

namespace {

constexpr const char* kMomentumBuffer = "momentum_buffer";

// _single_tensor_sgd: the fused kernels' math (ops::SgdUpdate) as in-place ember ops.
void sgd_single_tensor(const Tensor& param, const Tensor& grad, OptimizerParamState& s,
                       const FusedSgdArgs& a) {
  const ops::SgdUpdate<double> c(a);
  Tensor g = a.maximize ? grad.neg() : grad;
  if (c.has_weight_decay) g = g.add(param, c.weight_decay);
  if (c.has_momentum) {
    if (Tensor* buf = s.buffers.find(kMomentumBuffer))
      buf->mul_(c.momentum).add_(g, c.one_minus_dampening);
    else
      s.buffers.insert(kMomentumBuffer, g.clone());
    const Tensor& buf = s.buffers.at(kMomentumBuffer);
    g = c.nesterov ? g.add(buf, c.momentum) : buf;
  }
  param.add_(g, c.neg_lr);
}

}  // namespace

SGD::SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& defaults)
    : Optimizer(std::move(groups), defaults.clone()) {}
SGD::SGD(std::vector<Tensor> params, const SGDOptions& defaults)
    : Optimizer({OptimizerParamGroup(std::move(params))}, defaults.clone()) {}

std::vector<std::string> SGD::state_buffer_names(const OptimizerOptions& options) const {
  if (static_cast<const SGDOptions&>(options).momentum() == 0) return {};
  return {kMomentumBuffer};
}

void SGD::step_group(OptimizerParamGroup& group) {
  const FusedSgdArgs args = static_cast<const SGDOptions&>(group.options()).args();
  const auto [params, grads] = params_with_grads(group);
  if (!use_fused(group, params, grads)) {
    check_per_tensor_step(params);
    for (size_t i = 0; i < params.size(); ++i)
      sgd_single_tensor(params[i], grads[i], init_state(params[i], false), args);
    return;
  }
  for (const std::vector<size_t>& same : group_by_device_and_dtype(params)) {
    // Parameters without a momentum buffer yet take the first-step form (buffer = gradient). Their
    // buffers start as zeros, not garbage, in case found_inf skips this step.
    std::vector<size_t> later, first;
    for (size_t i : same) {
      OptimizerParamState& s = init_state(params[i], true);
      bool has_buffer = args.momentum == 0 || s.buffers.contains(kMomentumBuffer);
      if (!has_buffer) s.buffers.insert(kMomentumBuffer, zeros_like(params[i]));
      (has_buffer ? later : first).push_back(i);
    }
    for (bool is_first : {false, true}) {
      const std::vector<size_t>& part = is_first ? first : later;
      if (part.empty()) continue;
      std::vector<Tensor> p, g, bufs;
      for (size_t i : part) {
        p.push_back(params[i]);
        g.push_back(grads[i]);
        if (args.momentum != 0)
          bufs.push_back(state().at(params[i].unsafe_impl()).buffers.at(kMomentumBuffer));
      }
      FusedSgdArgs a = args;
      a.is_first_step = is_first;
      auto [grad_scale, found_inf] = grad_scaling_on(p[0].device());
      const std::vector<Tensor> casts = kept_casts(p);
      fused_sgd_(p, g, bufs, a, grad_scale, found_inf, lr_tensor(group, p[0].device()), casts);
      kept_casts_written(p, casts);
    }
  }
}

}  // namespace ember::optim
