#include "ember/optim/adam.h"

#include "ember/core/factories.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/fused_optim_functors.h"

namespace ember::optim {

template <class Derived>
void AdamOptionsBase<Derived>::validate() const {
  const char* who = optimizer_name();
  EMBER_CHECK(lr_ >= 0, who, ": invalid learning rate: ", lr_);
  EMBER_CHECK(eps_ >= 0, who, ": invalid epsilon value: ", eps_);
  EMBER_CHECK(std::get<0>(betas_) >= 0 && std::get<0>(betas_) < 1, who,
              ": invalid beta parameter at index 0: ", std::get<0>(betas_), " (must be in [0, 1))");
  EMBER_CHECK(std::get<1>(betas_) >= 0 && std::get<1>(betas_) < 1, who,
              ": invalid beta parameter at index 1: ", std::get<1>(betas_), " (must be in [0, 1))");
  EMBER_CHECK(weight_decay_ >= 0, who, ": invalid weight_decay value: ", weight_decay_);
}

template <class Derived>
void AdamOptionsBase<Derived>::visit(OptionVisitor& v) {
  v("lr", lr_);
  v("betas", betas_);
  v("eps", eps_);
  v("weight_decay", weight_decay_);
  v("amsgrad", amsgrad_);
  v("maximize", maximize_);
  v("fused", fused_);
}

template <class Derived>
FusedAdamArgs AdamOptionsBase<Derived>::args() const {
  return {lr_,
          std::get<0>(betas_),
          std::get<1>(betas_),
          weight_decay_,
          eps_,
          amsgrad_,
          maximize_,
          std::is_same_v<Derived, AdamWOptions>};
}

template class AdamOptionsBase<AdamOptions>;
template class AdamOptionsBase<AdamWOptions>;

namespace {

// A handle to the named buffer, created as zeros at first use.
Tensor buffer(OptimizerParamState& s, const char* name, const Tensor& param) {
  if (!s.buffers.contains(name)) s.buffers.insert(name, zeros_like(param));
  return s.buffers.at(name);
}

// _single_tensor_adam: the fused kernels' math (ops::AdamUpdate) as in-place ember ops on any
// device, each rounding in the tensor's dtype as PyTorch's does.
void adam_single_tensor(const Tensor& param, const Tensor& grad, OptimizerParamState& s,
                        const FusedAdamArgs& a) {
  float* step = s.step.data_ptr<float>();
  const ops::AdamUpdate<double> c(a, *step += 1);
  Tensor g = a.maximize ? grad.neg() : grad;
  if (c.has_weight_decay) {
    if (c.decoupled)
      param.mul_(c.decay);
    else
      g = g.add(param, c.weight_decay);
  }
  Tensor exp_avg = buffer(s, "exp_avg", param), exp_avg_sq = buffer(s, "exp_avg_sq", param);
  Tensor diff = g.sub(exp_avg);  // exp_avg.lerp_(g, 1 - beta1), in lerp's two forms
  if (c.lerp_from_start)
    exp_avg.add_(diff, c.lerp_weight);
  else
    exp_avg.copy_(g).sub_(diff, c.one_minus_lerp_weight);
  exp_avg_sq.mul_(c.beta2).add_(g.mul(c.one_minus_beta2).mul_(g));
  Tensor second = exp_avg_sq;
  if (a.amsgrad) {
    Tensor max_exp_avg_sq = buffer(s, "max_exp_avg_sq", param);
    max_exp_avg_sq.copy_(maximum(max_exp_avg_sq, exp_avg_sq));
    second = max_exp_avg_sq;
  }
  Tensor denom = second.sqrt().div_(c.bias_correction2_sqrt).add_(c.eps);
  param.add_(exp_avg.mul(c.neg_step_size).div_(denom));
}

}  // namespace

Adam::Adam(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : Optimizer(std::move(groups), std::move(defaults)) {}
Adam::Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults)
    : Adam(std::move(groups), defaults.clone()) {}
Adam::Adam(std::vector<Tensor> params, const AdamOptions& defaults)
    : Adam({OptimizerParamGroup(std::move(params))}, defaults.clone()) {}
AdamW::AdamW(std::vector<OptimizerParamGroup> groups, const AdamWOptions& defaults)
    : Adam(std::move(groups), defaults.clone()) {}
AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& defaults)
    : Adam({OptimizerParamGroup(std::move(params))}, defaults.clone()) {}

std::vector<std::string> Adam::state_buffer_names(const OptimizerOptions& options) const {
  std::vector<std::string> names = {"exp_avg", "exp_avg_sq"};
  if (static_cast<const AdamFamilyOptions&>(options).amsgrad()) names.push_back("max_exp_avg_sq");
  return names;
}

void Adam::step_group(OptimizerParamGroup& group) {
  const FusedAdamArgs args = static_cast<const AdamFamilyOptions&>(group.options()).args();
  const auto [params, grads] = params_with_grads(group);
  const bool fused = use_fused(group, params, grads);
  if (!fused) {
    check_per_tensor_step(params);
    for (size_t i = 0; i < params.size(); ++i)
      adam_single_tensor(params[i], grads[i], init_state(params[i], false), args);
    return;
  }
  for (const std::vector<size_t>& same : group_by_device_and_dtype(params)) {
    std::vector<Tensor> p, g, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    for (size_t i : same) {
      OptimizerParamState& s = init_state(params[i], true);
      p.push_back(params[i]);
      g.push_back(grads[i]);
      exp_avgs.push_back(buffer(s, "exp_avg", params[i]));
      exp_avg_sqs.push_back(buffer(s, "exp_avg_sq", params[i]));
      if (args.amsgrad) max_exp_avg_sqs.push_back(buffer(s, "max_exp_avg_sq", params[i]));
      steps.push_back(s.step);
    }
    auto [grad_scale, found_inf] = grad_scaling_on(p[0].device());
    const std::vector<Tensor> casts = kept_casts(p);
    fused_adam_(p, g, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, args, grad_scale, found_inf,
                lr_tensor(group, p[0].device()), casts);
    kept_casts_written(p, casts);
  }
}

}  // namespace ember::optim
