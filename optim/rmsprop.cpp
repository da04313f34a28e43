#include "ember/optim/rmsprop.h"

#include <cmath>

#include "ember/core/factories.h"

namespace ember::optim {

void RMSpropOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "RMSprop: invalid learning rate: ", lr_);
  EMBER_CHECK(eps_ >= 0, "RMSprop: invalid epsilon value: ", eps_);
  EMBER_CHECK(momentum_ >= 0, "RMSprop: invalid momentum value: ", momentum_);
  EMBER_CHECK(weight_decay_ >= 0, "RMSprop: invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK(alpha_ >= 0, "RMSprop: invalid alpha value: ", alpha_);
}

void RMSpropOptions::visit(OptionVisitor& v) {
  v("lr", lr_);
  v("alpha", alpha_);
  v("eps", eps_);
  v("weight_decay", weight_decay_);
  v("momentum", momentum_);
  v("centered", centered_);
  v("maximize", maximize_);
}

namespace {

constexpr const char* kSquareAvg = "square_avg";
constexpr const char* kMomentumBuffer = "momentum_buffer";
constexpr const char* kGradAvg = "grad_avg";

// The buffer `name` of state s (a handle: a later insert may move the entries), zeros like `param`
// at the first step.
Tensor buffer(OptimizerParamState& s, const char* name, const Tensor& param) {
  if (!s.buffers.contains(name)) s.buffers.insert(name, zeros_like(param));
  return s.buffers.at(name);
}

// _single_tensor_rmsprop.
void rmsprop_single_tensor(const Tensor& param, const Tensor& grad, OptimizerParamState& s,
                           const RMSpropOptions& o) {
  *s.step.data_ptr<float>() += 1;
  Tensor g = o.maximize() ? grad.neg() : grad;
  if (o.weight_decay() != 0) g = g.add(param, o.weight_decay());
  Tensor square_avg = buffer(s, kSquareAvg, param);
  square_avg.mul_(o.alpha()).add_(g * g, 1 - o.alpha());
  Tensor avg;
  if (o.centered()) {
    Tensor grad_avg = buffer(s, kGradAvg, param);
    grad_avg.mul_(o.alpha()).add_(g, 1 - o.alpha());
    avg = (square_avg - grad_avg * grad_avg).sqrt() + o.eps();
  } else {
    avg = square_avg.sqrt() + o.eps();
  }
  if (o.momentum() > 0) {
    Tensor buf = buffer(s, kMomentumBuffer, param);
    buf.mul_(o.momentum()).add_(g / avg);
    param.add_(buf, -o.lr());
  } else {
    param.add_(g / avg, -o.lr());
  }
}

}  // namespace

RMSprop::RMSprop(std::vector<OptimizerParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer(std::move(groups), defaults.clone()) {}
RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& defaults)
    : Optimizer({OptimizerParamGroup(std::move(params))}, defaults.clone()) {}

std::vector<std::string> RMSprop::state_buffer_names(const OptimizerOptions& options) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  std::vector<std::string> names{kSquareAvg};
  if (o.momentum() > 0) names.push_back(kMomentumBuffer);
  if (o.centered()) names.push_back(kGradAvg);
  return names;
}

void RMSprop::step_group(OptimizerParamGroup& group) {
  const auto& o = static_cast<const RMSpropOptions&>(group.options());
  const auto [params, grads] = params_with_grads(group);
  check_per_tensor_step(params);
  for (size_t i = 0; i < params.size(); ++i)
    rmsprop_single_tensor(params[i], grads[i], init_state(params[i], false), o);
}

}  // namespace ember::optim
