// PyTorch's ReduceLROnPlateau (torch/optim/lr_scheduler.py), step for step.
#include "ember/optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/optim/state_text.h"

namespace ember::optim {

namespace {
const char* kName = "ReduceLROnPlateau";
}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer), options_(std::move(options)) {
  EMBER_CHECK(options_.factor < 1.0 && options_.factor > 0, kName, ": factor must be in (0, 1), got ",
              options_.factor);
  EMBER_CHECK(options_.mode == "min" || options_.mode == "max", kName,
              ": mode must be \"min\" or \"max\", got \"", options_.mode, "\"");
  EMBER_CHECK(options_.threshold_mode == "rel" || options_.threshold_mode == "abs", kName,
              ": threshold_mode must be \"rel\" or \"abs\", got \"", options_.threshold_mode, "\"");
  EMBER_CHECK(options_.patience >= 0 && options_.cooldown >= 0, kName,
              ": patience and cooldown must not be negative, got ", options_.patience, " and ",
              options_.cooldown);
  const size_t groups = optimizer.param_groups().size();
  EMBER_CHECK(options_.min_lr.size() == 1 || options_.min_lr.size() == groups, kName,
              ": min_lr must have one value or one per parameter group (", groups, "), got ",
              options_.min_lr.size());
  min_lrs_ = options_.min_lr.size() == 1 ? std::vector<double>(groups, options_.min_lr[0]) : options_.min_lr;
  best_ = options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                 : -std::numeric_limits<double>::infinity();
  for (const OptimizerParamGroup& g : optimizer.param_groups()) last_lr_.push_back(g.options().get_lr());
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min")
    return rel ? a < best_ * (1.0 - options_.threshold) : a < best_ - options_.threshold;
  return rel ? a > best_ * (options_.threshold + 1.0) : a > best_ + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // ignore the bad epochs of the cooldown
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
  EMBER_CHECK(groups.size() == min_lrs_.size(), kName, ": the optimizer has ", groups.size(),
              " parameter groups, the scheduler was made for ", min_lrs_.size());
  if (num_bad_epochs_ > options_.patience) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const double old_lr = groups[i].options().get_lr();
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[i]);
      if (old_lr - new_lr > options_.eps) groups[i].options().set_lr(new_lr);
    }
    optimizer_.write_lr_tensors();
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const OptimizerParamGroup& g : groups) last_lr_.push_back(g.options().get_lr());
}

StateDict ReduceLROnPlateau::state_dict() const {
  StateDict sd;
  sd.metadata["scheduler"] = kName;
  sd.metadata["last_epoch"] = detail::format_number(static_cast<double>(last_epoch_));
  sd.metadata["best"] = detail::format_number(best_);
  sd.metadata["num_bad_epochs"] = detail::format_number(static_cast<double>(num_bad_epochs_));
  sd.metadata["cooldown_counter"] = detail::format_number(static_cast<double>(cooldown_counter_));
  sd.metadata["last_lr"] = detail::format_numbers(last_lr_);
  return sd;
}

void ReduceLROnPlateau::load_state_dict(const StateDict& sd) {
  const std::string who = std::string(kName) + ".load_state_dict";
  auto get = [&](const char* key) -> const std::string& {
    return detail::metadata_at(sd.metadata, who, key);
  };
  EMBER_CHECK(get("scheduler") == kName, who, ": the state dict is from ", get("scheduler"), ", not ", kName);
  std::vector<double> last = detail::parse_numbers(who, "last_lr", get("last_lr"));
  EMBER_CHECK(last.size() == min_lrs_.size(), who, ": the state dict has lrs for ", last.size(),
              " parameter groups, the optimizer has ", min_lrs_.size());
  last_epoch_ = static_cast<int64_t>(detail::parse_number(who, "last_epoch", get("last_epoch")));
  best_ = detail::parse_number(who, "best", get("best"));
  num_bad_epochs_ = static_cast<int64_t>(detail::parse_number(who, "num_bad_epochs", get("num_bad_epochs")));
  cooldown_counter_ =
      static_cast<int64_t>(detail::parse_number(who, "cooldown_counter", get("cooldown_counter")));
  last_lr_ = std::move(last);
}

}  // namespace ember::optim
