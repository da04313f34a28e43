#pragma once

// RMSprop with smoothing constant alpha, momentum, the centered variant, weight decay and
// maximize, with PyTorch's update rule (torch/optim/rmsprop.py, _single_tensor_rmsprop) and
// defaults. A per-tensor step: no fused kernel.

#include "ember/optim/optimizer.h"

namespace ember::optim {

class RMSpropOptions : public OptimizerOptions {
 public:
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}

  RMSpropOptions& lr(double v) { return set(lr_, v); }
  RMSpropOptions& alpha(double v) { return set(alpha_, v); }
  RMSpropOptions& eps(double v) { return set(eps_, v); }
  RMSpropOptions& weight_decay(double v) { return set(weight_decay_, v); }
  RMSpropOptions& momentum(double v) { return set(momentum_, v); }
  RMSpropOptions& centered(bool v) { return set(centered_, v); }
  RMSpropOptions& maximize(bool v) { return set(maximize_, v); }
  double lr() const { return lr_; }
  double alpha() const { return alpha_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  double momentum() const { return momentum_; }
  bool centered() const { return centered_; }
  bool maximize() const { return maximize_; }

  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<RMSpropOptions>(*this); }
  const char* optimizer_name() const override { return "RMSprop"; }
  void validate() const override;
  void visit(OptionVisitor& v) override;
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return momentum_; }
  void set_momentum(double v) override { momentum_ = v; }
  std::optional<bool> get_fused() const override { return false; }

 private:
  template <class T>
  RMSpropOptions& set(T& field, const T& v) {
    field = v;
    return *this;
  }

  double lr_;
  double alpha_ = 0.99;
  double eps_ = 1e-8;
  double weight_decay_ = 0;
  double momentum_ = 0;
  bool centered_ = false;
  bool maximize_ = false;
};

// State per parameter: step, square_avg; momentum_buffer with momentum; grad_avg when centered.
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<OptimizerParamGroup> groups, const RMSpropOptions& defaults = {});
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& defaults = {});

 protected:
  void step_group(OptimizerParamGroup& group) override;
  std::vector<std::string> state_buffer_names(const OptimizerOptions& options) const override;
  bool counts_steps() const override { return true; }
};

}  // namespace ember::optim
