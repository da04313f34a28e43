// Each get_lr() / closed_form_lr() is PyTorch's expression in the same order of operations, so
// the lrs agree to the last bit (torch/optim/lr_scheduler.py).
#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ember/optim/state_text.h"

namespace ember::optim {
namespace {

using detail::format_number;
using detail::format_numbers;
using detail::metadata_at;
using detail::parse_number;
using detail::parse_numbers;
using detail::per_group;

constexpr double kPi = std::numbers::pi;

// Python's % for a positive divisor: never negative.
int64_t python_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

}  // namespace

std::vector<double> detail::per_group(const char* who, const char* what, const std::vector<double>& v,
                                      size_t groups) {
  EMBER_CHECK(v.size() == 1 || v.size() == groups, who, ": ", what,
              " must have one value or one per parameter group (", groups, "), got ", v.size());
  return v.size() == 1 ? std::vector<double>(groups, v[0]) : v;
}

// --- LRScheduler ---

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (OptimizerParamGroup& g : optimizer.param_groups()) {
    if (!g.initial_lr()) g.initial_lr() = g.options().get_lr();
    base_lrs_.push_back(*g.initial_lr());
  }
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  is_initial_ = true;
  step();
  is_initial_ = false;
}

void LRScheduler::step() {
  ++step_count_;
  update_lr();
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> lrs;
  for (const OptimizerParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.options().get_lr());
  return lrs;
}

void LRScheduler::check_groups() const {
  const size_t groups = optimizer_.param_groups().size();
  EMBER_CHECK(groups == base_lrs_.size(), name(), ": the optimizer has ", groups,
              " parameter groups, the scheduler was made for ", base_lrs_.size());
}

void LRScheduler::set_lrs(const std::vector<double>& lrs) {
  std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lrs[i]);
  optimizer_.write_lr_tensors();
  last_lr_ = current_lrs();
}

void LRScheduler::update_lr(std::optional<int64_t> epoch) {
  check_groups();
  std::vector<double> lrs;
  if (epoch) {
    last_epoch_ = *epoch;
    std::optional<std::vector<double>> closed = closed_form_lr();
    lrs = closed ? *closed : get_lr();
  } else {
    ++last_epoch_;
    lrs = get_lr();
  }
  set_lrs(lrs);
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  save(sd.metadata, "");
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) { load(sd.metadata, ""); }

void LRScheduler::save(std::map<std::string, std::string>& out, const std::string& prefix) const {
  out[prefix + "scheduler"] = name();
  out[prefix + "last_epoch"] = format_number(static_cast<double>(last_epoch_));
  out[prefix + "step_count"] = format_number(static_cast<double>(step_count_));
  out[prefix + "base_lrs"] = format_numbers(base_lrs_);
  out[prefix + "last_lr"] = format_numbers(last_lr_);
}

void LRScheduler::load(const std::map<std::string, std::string>& in, const std::string& prefix) {
  const std::string who = std::string(name()) + ".load_state_dict";
  auto get = [&](const char* key) -> const std::string& { return metadata_at(in, who, prefix + key); };
  EMBER_CHECK(get("scheduler") == name(), who, ": the state dict is from ", get("scheduler"), ", not ",
              name());
  std::vector<double> base = parse_numbers(who, prefix + "base_lrs", get("base_lrs"));
  std::vector<double> last = parse_numbers(who, prefix + "last_lr", get("last_lr"));
  size_t groups = optimizer_.param_groups().size();
  EMBER_CHECK(base.size() == groups && last.size() == groups, who, ": the state dict has lrs for ",
              base.size(), " parameter groups, the optimizer has ", groups);
  last_epoch_ = static_cast<int64_t>(parse_number(who, prefix + "last_epoch", get("last_epoch")));
  step_count_ = static_cast<int64_t>(parse_number(who, prefix + "step_count", get("step_count")));
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// --- StepLR ---

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

// --- MultiStepLR ---

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  auto times = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (times == 0) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, static_cast<double>(times));
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// --- ExponentialLR ---

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  if (is_initial_) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

// --- CosineAnnealingLR ---

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  EMBER_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  if (is_initial_) return lrs;
  const double epoch = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  for (size_t i = 0; i < lrs.size(); ++i) {
    if (step_count_ == 1 && last_epoch_ > 0)  // resumed: the closed form
      lrs[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(epoch * kPi / T)) / 2;
    else if (python_mod(last_epoch_ - 1 - T_max_, 2 * T_max_) == 0)  // past a minimum, where the ratio is 0/0
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    else
      lrs[i] = (1 + std::cos(kPi * epoch / T)) / (1 + std::cos(kPi * (epoch - 1) / T)) * (lrs[i] - eta_min_) +
               eta_min_;
  }
  return lrs;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ +
                  (base - eta_min_) *
                      (1 + std::cos(kPi * static_cast<double>(last_epoch_) / static_cast<double>(T_max_))) /
                      2);
  return lrs;
}

// --- PolynomialLR ---

PolynomialLR::PolynomialLR(Optimizer& optimizer, int64_t total_iters, double power)
    : LRScheduler(optimizer), total_iters_(total_iters), power_(power) {
  EMBER_CHECK(total_iters > 0, "PolynomialLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

std::vector<double> PolynomialLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  if (is_initial_ || last_epoch_ == 0 || last_epoch_ > total_iters_) return lrs;
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(total_iters_);
  const double decay = std::pow((1.0 - e / T) / (1.0 - (e - 1) / T), power_);
  for (double& lr : lrs) lr *= decay;
  return lrs;
}

std::optional<std::vector<double>> PolynomialLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double T = static_cast<double>(total_iters_);
  for (double base : base_lrs_)
    lrs.push_back(base *
                  std::pow(1.0 - static_cast<double>(std::min(total_iters_, last_epoch_)) / T, power_));
  return lrs;
}

// --- CosineAnnealingWarmRestarts ---

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult,
                                                         double eta_min)
    : LRScheduler(optimizer),
      T_0_(T_0),
      T_mult_(T_mult),
      eta_min_(eta_min),
      T_i_(static_cast<double>(T_0)),
      T_cur_(-1) {
  EMBER_CHECK(T_0 > 0, "CosineAnnealingWarmRestarts: T_0 must be positive, got ", T_0);
  EMBER_CHECK(T_mult >= 1, "CosineAnnealingWarmRestarts: T_mult must be at least 1, got ", T_mult);
  initial_step();
}

std::vector<double> CosineAnnealingWarmRestarts::get_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(kPi * T_cur_ / T_i_)) / 2);
  return lrs;
}

void CosineAnnealingWarmRestarts::step() {
  if (last_epoch_ < 0) return step(0.0);
  check_groups();
  ++step_count_;
  ++last_epoch_;
  T_cur_ += 1;
  if (T_cur_ >= T_i_) {
    T_cur_ -= T_i_;
    T_i_ *= static_cast<double>(T_mult_);
  }
  set_lrs(get_lr());
}

void CosineAnnealingWarmRestarts::step(double epoch) {
  EMBER_CHECK(epoch >= 0, name(), ": expected a non-negative epoch, got ", epoch);
  check_groups();
  ++step_count_;
  const double T0 = static_cast<double>(T_0_), mult = static_cast<double>(T_mult_);
  if (epoch >= T0) {
    if (T_mult_ == 1) {
      T_cur_ = std::fmod(epoch, T0);
    } else {
      const auto n = static_cast<int64_t>(std::log(epoch / T0 * (mult - 1) + 1) / std::log(mult));
      T_cur_ = epoch - T0 * (std::pow(mult, static_cast<double>(n)) - 1) / (mult - 1);
      T_i_ = T0 * std::pow(mult, static_cast<double>(n));
    }
  } else {
    T_i_ = T0;
    T_cur_ = epoch;
  }
  last_epoch_ = static_cast<int64_t>(std::floor(epoch));
  set_lrs(get_lr());
}

void CosineAnnealingWarmRestarts::save(std::map<std::string, std::string>& out,
                                       const std::string& prefix) const {
  LRScheduler::save(out, prefix);
  out[prefix + "T_i"] = format_number(T_i_);
  out[prefix + "T_cur"] = format_number(T_cur_);
}

void CosineAnnealingWarmRestarts::load(const std::map<std::string, std::string>& in,
                                       const std::string& prefix) {
  LRScheduler::load(in, prefix);
  const std::string who = std::string(name()) + ".load_state_dict";
  T_i_ = parse_number(who, prefix + "T_i", metadata_at(in, who, prefix + "T_i"));
  T_cur_ = parse_number(who, prefix + "T_cur", metadata_at(in, who, prefix + "T_cur"));
}

// --- LinearLR ---

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  EMBER_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ",
              start_factor);
  EMBER_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ", end_factor);
  EMBER_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (is_initial_ || last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  for (double& lr : lrs)
    lr = lr * (1.0 + delta / (static_cast<double>(total_iters_) * start_factor_ +
                              static_cast<double>(last_epoch_ - 1) * delta));
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double done = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double base : base_lrs_)
    lrs.push_back(base *
                  (start_factor_ + (end_factor_ - start_factor_) * done / static_cast<double>(total_iters_)));
  return lrs;
}

// --- LambdaLR ---

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
    : LambdaLR(optimizer, std::vector<Lambda>(optimizer.param_groups().size(), std::move(lr_lambda))) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer), lr_lambdas_(std::move(lr_lambdas)) {
  EMBER_CHECK(lr_lambdas_.size() == base_lrs_.size(), "LambdaLR: expected ", base_lrs_.size(),
              " lr_lambdas (one per parameter group), but got ", lr_lambdas_.size());
  for (size_t i = 0; i < lr_lambdas_.size(); ++i)
    EMBER_CHECK(lr_lambdas_[i], "LambdaLR: lr_lambdas[", i, "] is empty");
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t i = 0; i < base_lrs_.size(); ++i) lrs.push_back(base_lrs_[i] * lr_lambdas_[i](last_epoch_));
  return lrs;
}

// --- OneCycleLR ---

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, int64_t total_steps,
                       const OneCycleLROptions& o)
    : LRScheduler(optimizer), total_steps_(total_steps), cycle_momentum_(o.cycle_momentum) {
  const char* who = "OneCycleLR";
  EMBER_CHECK(total_steps > 0, who, ": expected a positive total_steps, but got ", total_steps);
  EMBER_CHECK(o.pct_start >= 0 && o.pct_start <= 1, who, ": expected pct_start between 0 and 1, but got ",
              o.pct_start);
  EMBER_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear", who,
              ": anneal_strategy must be one of 'cos' or 'linear', instead got '", o.anneal_strategy, "'");
  linear_ = o.anneal_strategy == "linear";
  EMBER_CHECK(!cycle_momentum_ || optimizer.defaults().has_momentum(), who,
              ": the optimizer must support momentum or beta1 with cycle_momentum on (",
              optimizer.defaults().optimizer_name(), " has neither)");
  std::vector<OptimizerParamGroup>& groups = optimizer.param_groups();
  const size_t n = groups.size();
  const std::vector<double> max_lrs = per_group(who, "max_lr", max_lr, n);
  std::vector<double> max_m(n), base_m(n);
  if (cycle_momentum_) {
    max_m = per_group(who, "max_momentum", o.max_momentum, n);
    base_m = per_group(who, "base_momentum", o.base_momentum, n);
  }
  // Checked; now the groups start the cycle.
  std::vector<double> initial(n), min(n);
  for (size_t i = 0; i < n; ++i) {
    initial[i] = max_lrs[i] / o.div_factor;
    min[i] = initial[i] / o.final_div_factor;
    groups[i].initial_lr() = base_lrs_[i] = initial[i];
    if (cycle_momentum_) groups[i].options().set_momentum(max_m[i]);
  }
  const double T = static_cast<double>(total_steps);
  if (o.three_phase) {
    phases_ = {{o.pct_start * T - 1, initial, max_lrs, max_m, base_m},
               {2 * o.pct_start * T - 2, max_lrs, initial, base_m, max_m},
               {T - 1, initial, min, max_m, max_m}};
  } else {
    phases_ = {{o.pct_start * T - 1, initial, max_lrs, max_m, base_m}, {T - 1, max_lrs, min, base_m, max_m}};
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (linear_) return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
}

std::vector<double> OneCycleLR::get_lr() {
  EMBER_CHECK(last_epoch_ <= total_steps_, "OneCycleLR: tried to step ", last_epoch_,
              " times. The specified number of total steps is ", total_steps_);
  std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
  const double step = static_cast<double>(last_epoch_);
  // The phase holding this step, and how far into it (phases end where the next starts).
  size_t k = 0;
  double start_step = 0;
  while (k + 1 < phases_.size() && step > phases_[k].end_step) start_step = phases_[k++].end_step;
  const Phase& phase = phases_[k];
  EMBER_CHECK(phase.end_step != start_step, "OneCycleLR: phase ", k, " has no steps (total_steps ",
              total_steps_, ")");
  const double pct = (step - start_step) / (phase.end_step - start_step);
  std::vector<double> lrs;
  for (size_t i = 0; i < groups.size(); ++i) {
    lrs.push_back(anneal(phase.start_lr[i], phase.end_lr[i], pct));
    if (cycle_momentum_)
      groups[i].options().set_momentum(anneal(phase.start_momentum[i], phase.end_momentum[i], pct));
  }
  return lrs;
}

// --- SequentialLR ---

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  EMBER_CHECK(!schedulers_.empty(), "SequentialLR: expects at least one scheduler, but got none");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    EMBER_CHECK(schedulers_[i], "SequentialLR: scheduler ", i, " is null");
    EMBER_CHECK(&schedulers_[i]->optimizer() == &optimizer,
                "SequentialLR: expects all schedulers to belong to "
                "the same optimizer, but scheduler ",
                i, " (", schedulers_[i]->name(), ") has another one");
  }
  EMBER_CHECK(milestones_.size() + 1 == schedulers_.size(),
              "SequentialLR: expects one milestone fewer than "
              "schedulers, but got ",
              schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  EMBER_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "SequentialLR: milestones must be increasing");
  // Back to the initial lrs and to before each scheduler's initial step; then the first one
  // (the one for epoch 0) takes it again.
  last_epoch_ = 0;
  for (OptimizerParamGroup& g : optimizer.param_groups()) g.options().set_lr(*g.initial_lr());
  undo_initial_step();
  const auto& first =
      schedulers_[std::upper_bound(milestones_.begin(), milestones_.end(), 0) - milestones_.begin()];
  first->initial_step();
  last_lr_ = first->get_last_lr();
}

void SequentialLR::undo_initial_step() {
  for (const auto& s : schedulers_) s->undo_initial_step();
}

void SequentialLR::step() {
  ++last_epoch_;
  size_t i = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  LRScheduler& s = *schedulers_[i];
  if (i > 0 && milestones_[i - 1] == last_epoch_)
    s.update_lr(0);
  else
    s.step();
  last_lr_ = s.get_last_lr();
}

void SequentialLR::save(std::map<std::string, std::string>& out, const std::string& prefix) const {
  LRScheduler::save(out, prefix);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->save(out, prefix + "schedulers." + std::to_string(i) + ".");
}

void SequentialLR::load(const std::map<std::string, std::string>& in, const std::string& prefix) {
  LRScheduler::load(in, prefix);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load(in, prefix + "schedulers." + std::to_string(i) + ".");
}

}  // namespace ember::optim
