#pragma once

// Adam and AdamW with PyTorch's update rules (torch/optim/adam.py, _single_tensor_adam), and its
// fused multi-tensor step (core/ops/fused_optim.h) when the options say fused(true), the
// default for CUDA parameters.

#include "ember/core/ops/fused_optim.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

// What Adam's step reads from either options class.
class AdamFamilyOptions : public OptimizerOptions {
 public:
  // The hyper-parameters of one update.
  virtual FusedAdamArgs args() const = 0;
  virtual bool amsgrad() const = 0;
};

// The options of Adam and AdamW (Derived: AdamOptions or AdamWOptions), with chainable setters.
template <class Derived>
class AdamOptionsBase : public AdamFamilyOptions {
 public:
  using Betas = std::tuple<double, double>;

  Derived& lr(double v) { return set(lr_, v); }
  Derived& betas(const Betas& v) { return set(betas_, v); }
  Derived& eps(double v) { return set(eps_, v); }
  Derived& weight_decay(double v) { return set(weight_decay_, v); }
  Derived& amsgrad(bool v) { return set(amsgrad_, v); }
  Derived& maximize(bool v) { return set(maximize_, v); }
  Derived& fused(std::optional<bool> v) { return set(fused_, v); }
  double lr() const { return lr_; }
  const Betas& betas() const { return betas_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  bool amsgrad() const override { return amsgrad_; }
  bool maximize() const { return maximize_; }
  std::optional<bool> fused() const { return fused_; }

  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  void validate() const override;
  void visit(OptionVisitor& v) override;
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return std::get<0>(betas_); }
  void set_momentum(double v) override { std::get<0>(betas_) = v; }
  std::optional<bool> get_fused() const override { return fused_; }
  FusedAdamArgs args() const override;

 protected:
  AdamOptionsBase(double lr, double weight_decay) : lr_(lr), weight_decay_(weight_decay) {}

 private:
  template <class T>
  Derived& set(T& field, const T& v) {
    field = v;
    return static_cast<Derived&>(*this);
  }

  double lr_;
  Betas betas_{0.9, 0.999};
  double eps_ = 1e-8;
  double weight_decay_;
  bool amsgrad_ = false;
  bool maximize_ = false;
  std::optional<bool> fused_;
};

class AdamOptions : public AdamOptionsBase<AdamOptions> {
 public:
  AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0) {}
  const char* optimizer_name() const override { return "Adam"; }
};

// AdamW's weight decay is decoupled (param *= 1 - lr * weight_decay) and defaults to 0.01.
class AdamWOptions : public AdamOptionsBase<AdamWOptions> {
 public:
  AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 1e-2) {}
  const char* optimizer_name() const override { return "AdamW"; }
};

// State per parameter: step, exp_avg, exp_avg_sq and, with amsgrad, max_exp_avg_sq.
class Adam : public Optimizer {
 public:
  Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults = {});
  Adam(std::vector<Tensor> params, const AdamOptions& defaults = {});

 protected:
  // AdamW's constructors.
  Adam(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);

  void step_group(OptimizerParamGroup& group) override;
  std::vector<std::string> state_buffer_names(const OptimizerOptions& options) const override;
  bool counts_steps() const override { return true; }
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<OptimizerParamGroup> groups, const AdamWOptions& defaults = {});
  AdamW(std::vector<Tensor> params, const AdamWOptions& defaults = {});
};

}  // namespace ember::optim
