#pragma once

// SGD with momentum, dampening, Nesterov momentum, weight decay and maximize, with PyTorch's
// update rule (torch/optim/sgd.py, _single_tensor_sgd), and its fused multi-tensor step
// (core/ops/fused_optim.h) when the options say fused(true), the default for CUDA parameters.

#include "ember/core/ops/fused_optim.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

class SGDOptions : public OptimizerOptions {
 public:
  SGDOptions(double lr = 1e-3) : lr_(lr) {}

  SGDOptions& lr(double v) { return set(lr_, v); }
  SGDOptions& momentum(double v) { return set(momentum_, v); }
  SGDOptions& dampening(double v) { return set(dampening_, v); }
  SGDOptions& weight_decay(double v) { return set(weight_decay_, v); }
  SGDOptions& nesterov(bool v) { return set(nesterov_, v); }
  SGDOptions& maximize(bool v) { return set(maximize_, v); }
  SGDOptions& fused(std::optional<bool> v) { return set(fused_, v); }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }
  bool maximize() const { return maximize_; }
  std::optional<bool> fused() const { return fused_; }

  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  const char* optimizer_name() const override { return "SGD"; }
  void validate() const override;
  void visit(OptionVisitor& v) override;
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return momentum_; }
  void set_momentum(double v) override { momentum_ = v; }
  std::optional<bool> get_fused() const override { return fused_; }
  // The hyper-parameters of one update.
  FusedSgdArgs args() const;

 private:
  template <class T>
  SGDOptions& set(T& field, const T& v) {
    field = v;
    return *this;
  }

  double lr_;
  double momentum_ = 0;
  double dampening_ = 0;
  double weight_decay_ = 0;
  bool nesterov_ = false;
  bool maximize_ = false;
  std::optional<bool> fused_;
};

// State per parameter (with momentum): momentum_buffer, the first step's gradient at first.
class SGD : public Optimizer {
 public:
  SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& defaults = {});
  SGD(std::vector<Tensor> params, const SGDOptions& defaults = {});

 protected:
  void step_group(OptimizerParamGroup& group) override;
  std::vector<std::string> state_buffer_names(const OptimizerOptions& options) const override;
  bool counts_steps() const override { return false; }
};

}  // namespace ember::optim
