#include "ember/optim/adagrad.h"

#include "ember/core/factories.h"

namespace ember::optim {

void AdagradOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "Adagrad: invalid learning rate: ", lr_);
  EMBER_CHECK(lr_decay_ >= 0, "Adagrad: invalid lr_decay value: ", lr_decay_);
  EMBER_CHECK(weight_decay_ >= 0, "Adagrad: invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK(initial_accumulator_value_ >= 0,
              "Adagrad: invalid initial_accumulator_value value: ", initial_accumulator_value_);
  EMBER_CHECK(eps_ >= 0, "Adagrad: invalid epsilon value: ", eps_);
}

void AdagradOptions::visit(OptionVisitor& v) {
  v("lr", lr_);
  v("lr_decay", lr_decay_);
  v("weight_decay", weight_decay_);
  v("initial_accumulator_value", initial_accumulator_value_);
  v("eps", eps_);
  v("maximize", maximize_);
}

Adagrad::Adagrad(std::vector<OptimizerParamGroup> groups, const AdagradOptions& defaults)
    : Optimizer(std::move(groups), defaults.clone()) {}
Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& defaults)
    : Optimizer({OptimizerParamGroup(std::move(params))}, defaults.clone()) {}

// _single_tensor_adagrad.
void Adagrad::step_group(OptimizerParamGroup& group) {
  const auto& o = static_cast<const AdagradOptions&>(group.options());
  const auto [params, grads] = params_with_grads(group);
  check_per_tensor_step(params);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& param = params[i];
    OptimizerParamState& s = init_state(param, false);
    if (!s.buffers.contains("sum")) s.buffers.insert("sum", full_like(param, o.initial_accumulator_value()));
    const float step = *s.step.data_ptr<float>() += 1;
    Tensor g = o.maximize() ? grads[i].neg() : grads[i];
    if (o.weight_decay() != 0) g = g.add(param, o.weight_decay());
    const double clr = o.lr() / (1 + (step - 1) * o.lr_decay());
    Tensor sum = s.buffers.at("sum");
    sum.add_(g * g);
    param.add_(g / (sum.sqrt() + o.eps()), -clr);
  }
}

}  // namespace ember::optim
