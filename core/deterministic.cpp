#include "ember/core/deterministic.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "ember/core/error.h"

namespace ember {

namespace {
std::atomic<bool> g_mode{false}, g_warn_only{false};
}  // namespace

void use_deterministic_algorithms(bool mode, bool warn_only) {
  g_warn_only.store(warn_only, std::memory_order_relaxed);
  g_mode.store(mode, std::memory_order_relaxed);
}

bool are_deterministic_algorithms_enabled() { return g_mode.load(std::memory_order_relaxed); }
bool is_deterministic_algorithms_warn_only_enabled() { return g_warn_only.load(std::memory_order_relaxed); }

namespace detail {

void alert_not_deterministic(const char* op, const std::string& what) {
  if (!are_deterministic_algorithms_enabled()) return;
  if (!is_deterministic_algorithms_warn_only_enabled())
    throw Error(str_cat(op, ": ", what,
                        " has no deterministic implementation, but use_deterministic_algorithms(true) is "
                        "set; pass warn_only = true to let it run with a warning"));
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(op).second)
    std::fprintf(stderr,
                 "ember warning: %s: %s has no deterministic implementation, but "
                 "use_deterministic_algorithms(true) is set (warn_only: it runs)\n",
                 op, what.c_str());
}

}  // namespace detail
}  // namespace ember
