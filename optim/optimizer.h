#pragma once

// The optimizer base, libtorch style: parameter groups that each carry their own options object,
// per-parameter state, zero_grad, step, and a StateDict to checkpoint all of it.
//
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.01));
//   optim::SGD sgd({optim::OptimizerParamGroup(backbone), optim::OptimizerParamGroup(head,
//                   std::make_unique<optim::SGDOptions>(0.1))}, optim::SGDOptions(0.01));

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ember/core/ordered_dict.h"
#include "ember/core/state_dict.h"
#include "ember/core/tensor.h"

namespace ember::optim {

// Reads or writes each option of an options object by name: state_dict() writes them as text,
// load_state_dict() parses them back.
class OptionVisitor {
 public:
  virtual ~OptionVisitor() = default;
  virtual void operator()(const char* name, double& value) = 0;
  virtual void operator()(const char* name, bool& value) = 0;
  virtual void operator()(const char* name, std::tuple<double, double>& value) = 0;
  virtual void operator()(const char* name, std::optional<bool>& value) = 0;
};

// The options of one parameter group (libtorch's OptimizerOptions). Each optimizer has its own
// subclass with chainable setters: AdamOptions(1e-3).betas({0.9, 0.98}).weight_decay(0.1).
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  // The optimizer these options belong to ("Adam"), for messages and state dicts.
  virtual const char* optimizer_name() const = 0;
  // Throws ember::Error naming the optimizer and the bad value.
  virtual void validate() const = 0;
  virtual void visit(OptionVisitor& v) = 0;

  // What the LR schedulers change.
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The momentum OneCycleLR cycles: SGD's momentum, Adam's beta1.
  virtual bool has_momentum() const { return false; }
  virtual double get_momentum() const;
  virtual void set_momentum(double momentum);
  // Unset: fused exactly when the group's parameters are on CUDA (and fit the fused kernels).
  virtual std::optional<bool> get_fused() const { return std::nullopt; }
};

// A parameter list and, optionally, its own options (without, the optimizer's defaults apply).
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  // A copy gets its own lr tensor at its first fused step.
  OptimizerParamGroup(const OptimizerParamGroup& o)
      : params_(o.params_),
        options_(o.options_ ? o.options_->clone() : nullptr),
        initial_lr_(o.initial_lr_) {}
  OptimizerParamGroup& operator=(const OptimizerParamGroup& o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    initial_lr_ = o.initial_lr_;
    lr_tensor_ = Tensor();
    return *this;
  }
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  // The lr the first LR scheduler found (PyTorch's group["initial_lr"]): later schedulers of the
  // same optimizer start from it too.
  std::optional<double>& initial_lr() { return initial_lr_; }
  std::optional<double> initial_lr() const { return initial_lr_; }
  // options().lr() as a float64 tensor on the parameters' device, which fused steps read where
  // they run, so a CUDA graph that captured a step replays with the rate last written there.
  // Made by the group's first fused step; undefined before.
  const Tensor& lr_tensor() const { return lr_tensor_; }

 private:
  friend class Optimizer;
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
  std::optional<double> initial_lr_;
  Tensor lr_tensor_;
  double lr_written_ = 0;  // what lr_tensor_ holds
};

// One parameter's state (PyTorch's optimizer.state[p]): buffers of the parameter's shape and
// dtype ("exp_avg", "momentum_buffer", ...) and, for optimizers that count steps, the step as a
// float32 0-dim tensor: on the CPU for the per-tensor step, on the parameter's device for the
// fused one (as PyTorch keeps it).
struct OptimizerParamState {
  Tensor step;
  OrderedDict<Tensor> buffers;
};

class Optimizer {
 public:
  using LossClosure = std::function<Tensor()>;

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient, under NoGradGuard. With a closure, calls it
  // first (grad mode on) and returns its loss; otherwise returns an undefined tensor.
  Tensor step(const LossClosure& closure = nullptr);
  // Sets each gradient to undefined (set_to_none) or to zeros.
  void zero_grad(bool set_to_none = true);
  // Appends a group; without options it takes a copy of the defaults. A parameter may belong to
  // one group only, and must be a defined leaf tensor.
  void add_param_group(const OptimizerParamGroup& group);

  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  // Every group's parameters, in order: the indices state_dict() uses.
  std::vector<Tensor> parameters() const;
  size_t size() const;
  const OptimizerOptions& defaults() const { return *defaults_; }
  OptimizerOptions& defaults() { return *defaults_; }
  // Keyed by the parameter's TensorImpl; a parameter gets an entry at its first update.
  std::unordered_map<const TensorImpl*, OptimizerParamState>& state() { return state_; }
  const std::unordered_map<const TensorImpl*, OptimizerParamState>& state() const { return state_; }

  // A snapshot (tensors copied): "optimizer" is the class name, "param_groups" the group count,
  // "param_groups.<g>.params" the group's parameter indices ("0,1,2"), "param_groups.<g>.<option>"
  // each option ("%.17g" numbers, "true"/"false", "" for an unset fused), "state.<i>.step" the
  // step count of parameter i, and tensors "state.<i>.<buffer>". Reading device-side step counts
  // waits for the device.
  StateDict state_dict() const;
  // Restores options and state from state_dict() of the same optimizer class with the same
  // group sizes; buffers are copied to their parameter's device and dtype. Throws ember::Error
  // saying what does not match, and then leaves the optimizer unchanged.
  void load_state_dict(const StateDict& state_dict);

  // What GradScaler hands a fused step (PyTorch sets optimizer.grad_scale / found_inf): the fused
  // kernels divide the gradients by grad_scale and skip the step where found_inf is nonzero,
  // without a host sync. Undefined tensors clear them; the per-tensor step refuses them.
  void set_grad_scaling(const Tensor& grad_scale, const Tensor& found_inf);
  // Whether step() runs every group that has gradients fused, so it takes set_grad_scaling()
  // (PyTorch's optimizer._step_supports_amp_scaling).
  bool step_supports_amp_scaling() const;
  // Writes each group's options().lr() into its lr tensor where it changed (queued on the current
  // stream). LR schedulers call it; call it after setting a rate by hand when a CUDA graph replays
  // the step (an eager step writes it itself).
  void write_lr_tensors();

 protected:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);

  // Updates the group's parameters that have gradients.
  virtual void step_group(OptimizerParamGroup& group) = 0;
  // The buffers a parameter's state holds under these options, and whether it counts steps.
  virtual std::vector<std::string> state_buffer_names(const OptimizerOptions& options) const = 0;
  virtual bool counts_steps() const = 0;

  const char* name() const { return defaults_->optimizer_name(); }
  // The group's parameters that have a gradient, and their gradients.
  static std::pair<std::vector<Tensor>, std::vector<Tensor>> params_with_grads(
      const OptimizerParamGroup& group);
  // Whether the group's update runs fused: as its options say, else when all its parameters
  // are CUDA tensors that the fused kernels take (contiguous, gradients of their dtype). A group
  // without gradients has nothing to update and counts as fused.
  bool use_fused(const OptimizerParamGroup& group, const std::vector<Tensor>& params,
                 const std::vector<Tensor>& grads) const;
  // The parameter's state, created at its first use with a zero step (when counts_steps());
  // the step lives on the parameter's device when `fused`, on the CPU otherwise.
  OptimizerParamState& init_state(const Tensor& param, bool fused);
  // grad_scale and found_inf on `device` (undefined when unset).
  std::pair<Tensor, Tensor> grad_scaling_on(Device device) const;
  // Throws when the per-tensor step cannot run: set_grad_scaling() is active, or the step is being
  // captured into a CUDA graph (its step counts and rate live on the host, so replays would repeat
  // the captured ones).
  void check_per_tensor_step(const std::vector<Tensor>& params) const;
  // For a fused step: the group's lr tensor on `device`, made or written when options().lr() changed.
  // Neither can happen while the step is captured into a CUDA graph (it would replay the write).
  const Tensor& lr_tensor(OptimizerParamGroup& group, Device device) const;
  // For a fused step: autocast's kept casts of `params` for it to write (core/autocast_mode.h), one
  // per param, undefined where none is current; empty when none is. After the step wrote them,
  // kept_casts_written(params, casts).
  static std::vector<Tensor> kept_casts(const std::vector<Tensor>& params);
  static void kept_casts_written(const std::vector<Tensor>& params, const std::vector<Tensor>& casts);

 private:
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<OptimizerParamGroup> groups_;
  std::unordered_map<const TensorImpl*, OptimizerParamState> state_;
  Tensor grad_scale_, found_inf_;
};

}  // namespace ember::optim
