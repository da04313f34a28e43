#pragma once

// The trainers' progress line: "epoch 3/30 [#########.......] 1200/2344 loss 0.4321 25130 img/s
// ETA 0:41". On a terminal it redraws in place; otherwise (a log file, CI) it prints a line each
// tenth of the way, so logs stay short and readable.
#include <chrono>
#include <cstdint>
#include <string>

namespace ember::examples {

class ProgressBar {
 public:
  // `enabled` false (ranks other than 0) prints nothing.
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  // `done` of `total` steps finished; `stats` follows the bar ("loss 0.43  25130 img/s").
  void update(int64_t done, const std::string& stats);
  // Ends the line (a terminal's bar stays as last drawn).
  void finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, tty_;
  int64_t last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_;
};

// "1:02:03" or "2:03".
std::string format_duration(double seconds);

}  // namespace ember::examples
