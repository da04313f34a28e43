#pragma once

// One training epoch's running loss and pace, as the trainers show them: the loss is summed on the
// device and read back only every `kReportEvery` steps (each read waits for the device) into the
// progress bar ("loss 0.4321 25130 img/s"); finish() gives the mean loss over every process and
// the epoch's seconds.
#include <chrono>
#include <cstdint>
#include <string>

#include <ember/ember.h>

#include "ember/examples/common/launch.h"
#include "ember/examples/common/progress_bar.h"

namespace ember::examples {

class EpochMeter {
 public:
  static constexpr int64_t kReportEvery = 20;

  // `unit` names what a step takes batch_size of ("img", "seq"); the rate counts every process.
  EpochMeter(int64_t epoch, int64_t epochs, int64_t steps, int64_t batch_size, const char* unit,
             const Launch& launch);
  // After each step, with its loss (any float dtype, on the launch's device).
  void add(const Tensor& loss);

  struct Summary {
    double train_loss;  // the mean over the epoch's steps and the processes
    double seconds;
    int64_t steps;
  };
  // Ends the progress line; with several processes, an all_reduce of the loss.
  Summary finish();

 private:
  const Launch& launch_;
  int64_t steps_, batch_size_, done_ = 0;
  const char* unit_;
  ProgressBar bar_;
  Tensor loss_sum_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ember::examples
