#pragma once

// Adagrad with lr decay, weight decay, an initial accumulator value and maximize, with PyTorch's
// update rule (torch/optim/adagrad.py, _single_tensor_adagrad) and defaults. A per-tensor step: no
// fused kernel.

#include "ember/optim/optimizer.h"

namespace ember::optim {

class AdagradOptions : public OptimizerOptions {
 public:
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}

  AdagradOptions& lr(double v) { return set(lr_, v); }
  AdagradOptions& lr_decay(double v) { return set(lr_decay_, v); }
  AdagradOptions& weight_decay(double v) { return set(weight_decay_, v); }
  AdagradOptions& initial_accumulator_value(double v) { return set(initial_accumulator_value_, v); }
  AdagradOptions& eps(double v) { return set(eps_, v); }
  AdagradOptions& maximize(bool v) { return set(maximize_, v); }
  double lr() const { return lr_; }
  double lr_decay() const { return lr_decay_; }
  double weight_decay() const { return weight_decay_; }
  double initial_accumulator_value() const { return initial_accumulator_value_; }
  double eps() const { return eps_; }
  bool maximize() const { return maximize_; }

  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdagradOptions>(*this); }
  const char* optimizer_name() const override { return "Adagrad"; }
  void validate() const override;
  void visit(OptionVisitor& v) override;
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
  std::optional<bool> get_fused() const override { return false; }

 private:
  template <class T>
  AdagradOptions& set(T& field, const T& v) {
    field = v;
    return *this;
  }

  double lr_;
  double lr_decay_ = 0;
  double weight_decay_ = 0;
  double initial_accumulator_value_ = 0;
  double eps_ = 1e-10;
  bool maximize_ = false;
};

// State per parameter: step and sum (the running sum of squared gradients, from
// initial_accumulator_value).
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<OptimizerParamGroup> groups, const AdagradOptions& defaults = {});
  Adagrad(std::vector<Tensor> params, const AdagradOptions& defaults = {});

 protected:
  void step_group(OptimizerParamGroup& group) override;
  std::vector<std::string> state_buffer_names(const OptimizerOptions&) const override { return {"sum"}; }
  bool counts_steps() const override { return true; }
};

}  // namespace ember::optim
