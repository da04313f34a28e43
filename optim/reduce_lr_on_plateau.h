#pragma once

// torch.optim.lr_scheduler.ReduceLROnPlateau: multiplies each group's lr by `factor` once the
// metric (a validation loss, say) has not improved for more than `patience` epochs, then waits
// `cooldown` epochs before counting again; never below min_lr.
//
//   optim::ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 2});
//   for (int epoch = 0; ...; ++epoch) { train(); plateau.step(validate()); }

#include <map>
#include <string>
#include <vector>

#include "ember/core/state_dict.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

struct ReduceLROnPlateauOptions {
  std::string mode = "min";            // "min": lower is better; "max": higher is
  double factor = 0.1;                 // in (0, 1)
  int64_t patience = 10;               // epochs without improvement that are tolerated
  double threshold = 1e-4;             // the least change that counts as an improvement
  std::string threshold_mode = "rel";  // "rel": relative to the best; "abs"
  int64_t cooldown = 0;
  std::vector<double> min_lr = {0.0};  // one value, or one per group
  double eps = 1e-8;                   // a smaller change of lr is not made
};

class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  // One epoch's metric.
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

  // The counters and the best metric as "%.17g" text; the options come from the constructor.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state_dict);

 private:
  bool is_better(double a) const;

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_, last_lr_;
  double best_;
  int64_t last_epoch_ = 0, num_bad_epochs_ = 0, cooldown_counter_ = 0;
};

}  // namespace ember::optim
