#include "ember/examples/common/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace ember::examples {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      enabled_(enabled),
      tty_(isatty(fileno(stdout)) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t done, const std::string& stats) {
  if (!enabled_) return;
  const int64_t tenth = 10 * done / total_;
  if (!tty_ && tenth == last_tenth_) return;
  last_tenth_ = tenth;
  constexpr int kWidth = 24;
  std::string bar(kWidth, '.');
  for (int64_t i = 0; i < kWidth * done / total_; ++i) bar[i] = '#';
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? secs * static_cast<double>(total_ - done) / static_cast<double>(done) : 0;
  std::printf("%s%s [%s] %lld/%lld %s ETA %s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
              (long long)done, (long long)total_, stats.c_str(), format_duration(eta).c_str(),
              tty_ ? "\033[K" : "\n");
  std::fflush(stdout);
}

void ProgressBar::finish() {
  if (enabled_ && tty_) std::printf("\n");
  std::fflush(stdout);
}

std::string format_duration(double seconds) {
  const long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

}  // namespace ember::examples
