// Without CUDA nothing waits for a GPU: the mode is only kept.
#include "ember/cuda/sync_debug.h"

namespace ember::cuda {

namespace {
SyncDebugMode mode = SyncDebugMode::Default;
}

void set_sync_debug_mode(SyncDebugMode m) { mode = m; }
SyncDebugMode get_sync_debug_mode() { return mode; }

}  // namespace ember::cuda
