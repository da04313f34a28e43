#pragma once

// torch.cuda.set_sync_debug_mode: what happens when an ember op waits for the GPU on its own (a
// copy to the host such as item(), a blocking copy from pageable memory, a peer copy, an op whose
// output size depends on values on the GPU). Explicit waits (synchronize(), Stream::synchronize,
// Event::synchronize) are never flagged. No CUDA types, so a build without CUDA has it too.
namespace ember::cuda {

enum class SyncDebugMode {
  Default,  // nothing
  Warn,     // a line on stderr naming the op
  Error,    // an ember::Error naming the op
};

void set_sync_debug_mode(SyncDebugMode mode);
SyncDebugMode get_sync_debug_mode();

namespace detail {
// Called by ember's synchronizing ops before they wait; `op` names what waits. During a CUDA graph
// capture it throws, whatever the mode.
void note_sync(const char* op);
}  // namespace detail

}  // namespace ember::cuda
