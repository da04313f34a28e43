#pragma once

// Learning-rate schedulers with PyTorch's semantics and arithmetic (torch/optim/lr_scheduler.py):
// the chainable ones scale the groups' current lr each step, as PyTorch does, so the values
// match it bit for bit. Call step() after the optimizer's step().
//
//   optim::SGD opt(params, optim::SGDOptions(0.1).momentum(0.9));
//   optim::CosineAnnealingLR sched(opt, /*T_max=*/100);
//   for (...) { ...; opt.step(); sched.step(); }

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/core/state_dict.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

class SequentialLR;

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch (or batch) and sets each group's lr.
  virtual void step();
  // The lrs the last step set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return optimizer_; }
  virtual const char* name() const = 0;

  // last_epoch, the step count, base and last lrs, as "%.17g" text; the schedule's settings
  // come from the constructor. Restoring into a scheduler of the same class and optimizer
  // group count resumes the schedule exactly.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state_dict);

 protected:
  // Takes the groups' initial lrs as base lrs. Subclasses call initial_step() at the end of
  // their constructor (get_lr() is virtual), which sets the epoch-0 lrs.
  explicit LRScheduler(Optimizer& optimizer);
  void initial_step();

  // The next lrs from the current ones (the chainable form), at last_epoch.
  virtual std::vector<double> get_lr() = 0;
  // The lrs at last_epoch from the base lrs, for schedulers that have one; SequentialLR uses it
  // at its milestones.
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }
  virtual void save(std::map<std::string, std::string>& out, const std::string& prefix) const;
  virtual void load(const std::map<std::string, std::string>& in, const std::string& prefix);
  // SequentialLR's construction takes back the initial step of each scheduler it holds.
  virtual void undo_initial_step() { --last_epoch_; }

  std::vector<double> current_lrs() const;
  // An error unless the optimizer still has the groups the scheduler was made for.
  void check_groups() const;
  // Sets each group's lr, and the last lrs.
  void set_lrs(const std::vector<double>& lrs);
  // PyTorch's _update_lr: last_epoch + 1 (or = epoch, with the closed form if any), lrs applied.
  void update_lr(std::optional<int64_t> epoch = std::nullopt);

  Optimizer& optimizer_;
  std::vector<double> base_lrs_, last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  bool is_initial_ = false;  // inside initial_step()

  friend class SequentialLR;
};

// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  const char* name() const override { return "StepLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr * gamma at each milestone (gamma^k for a milestone listed k times).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  const char* name() const override { return "MultiStepLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr * gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  const char* name() const override { return "ExponentialLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed recursively.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
  const char* name() const override { return "CosineAnnealingLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// base_lr * (1 - min(epoch, total_iters) / total_iters)^power, computed recursively.
class PolynomialLR : public LRScheduler {
 public:
  PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0);
  const char* name() const override { return "PolynomialLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t total_iters_;
  double power_;
};

// SGDR: cosine annealing from base_lr to eta_min over T_i epochs, then a restart at base_lr with
// T_i = T_i * T_mult (the first period T_0).
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1, double eta_min = 0);
  void step() override;
  // Jumps to `epoch` (fractional within a period, as PyTorch's step(epoch) for batch updates).
  void step(double epoch);
  const char* name() const override { return "CosineAnnealingWarmRestarts"; }

 protected:
  std::vector<double> get_lr() override;
  void save(std::map<std::string, std::string>& out, const std::string& prefix) const override;
  void load(const std::map<std::string, std::string>& in, const std::string& prefix) override;

 private:
  int64_t T_0_, T_mult_;
  double eta_min_;
  double T_i_, T_cur_;
};

// The factor goes linearly from start_factor to end_factor over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);
  const char* name() const override { return "LinearLR"; }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// base_lr * lr_lambda(epoch); one function for all groups, or one per group.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);
  const char* name() const override { return "LambdaLR"; }

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lr_lambdas_;
};

struct OneCycleLROptions {
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // or "linear"
  bool cycle_momentum = true;
  std::vector<double> base_momentum = {0.85};  // one value, or one per group
  std::vector<double> max_momentum = {0.95};
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

// The 1cycle policy: from max_lr / div_factor up to max_lr, then down to
// max_lr / (div_factor * final_div_factor), over total_steps steps; the momentum (SGD's, or
// Adam's beta1) cycles inversely between max_momentum and base_momentum.
//   OneCycleLR sched(opt, {0.1}, 1000, {.pct_start = 0.25, .anneal_strategy = "linear"});
class OneCycleLR : public LRScheduler {
 public:
  // max_lr: one value, or one per group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, int64_t total_steps,
             const OneCycleLROptions& options = {});
  const char* name() const override { return "OneCycleLR"; }

 protected:
  std::vector<double> get_lr() override;

 private:
  // Phase boundaries and, per group, the lr and momentum each phase starts and ends at.
  struct Phase {
    double end_step;
    std::vector<double> start_lr, end_lr, start_momentum, end_momentum;
  };
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  bool linear_;
  bool cycle_momentum_;
  std::vector<Phase> phases_;
};

// Runs schedulers one after the other: schedulers[i] from milestones[i - 1] on.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  const char* name() const override { return "SequentialLR"; }

 protected:
  // Unused: step() hands each epoch to the scheduler in charge.
  std::vector<double> get_lr() override { return current_lrs(); }
  void save(std::map<std::string, std::string>& out, const std::string& prefix) const override;
  void load(const std::map<std::string, std::string>& in, const std::string& prefix) override;
  void undo_initial_step() override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

namespace detail {
// `v` for every one of `groups` parameter groups: its one value repeated, or its one per group.
std::vector<double> per_group(const char* who, const char* what, const std::vector<double>& v, size_t groups);
}  // namespace detail

}  // namespace ember::optim
