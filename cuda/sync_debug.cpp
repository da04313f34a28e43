#include "ember/cuda/sync_debug.h"

#include <atomic>
#include <cstdio>

#include "ember/core/error.h"
#include "ember/cuda/graph.h"

namespace ember::cuda {

namespace {
std::atomic<SyncDebugMode> mode{SyncDebugMode::Default};
}

void set_sync_debug_mode(SyncDebugMode m) { mode.store(m, std::memory_order_relaxed); }
SyncDebugMode get_sync_debug_mode() { return mode.load(std::memory_order_relaxed); }

namespace detail {

void note_sync(const char* op) {
  // Checked before waiting: the wait itself would invalidate the capture.
  if (capture_underway())
    throw Error(ember::detail::str_cat(op,
                                       ": waits for the GPU, which a CUDA graph capture cannot contain "
                                       "(a capture is underway); move it out of the captured region"));
  switch (get_sync_debug_mode()) {
    case SyncDebugMode::Default:
      return;
    case SyncDebugMode::Warn:
      std::fprintf(stderr, "ember warning: %s waits for the GPU (a synchronizing operation)\n", op);
      return;
    case SyncDebugMode::Error:
      throw Error(ember::detail::str_cat(
          op,
          ": waits for the GPU (a synchronizing operation), and the sync debug mode is Error "
          "(cuda::set_sync_debug_mode)"));
  }
}

}  // namespace detail
}  // namespace ember::cuda
