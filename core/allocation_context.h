#pragma once

// What made each allocation, for memory snapshots (cuda::record_memory_history, PyTorch's
// torch.cuda.memory._record_memory_history): while recording is on, each module call
// ("nn.Module: Linear") and each kernel call (its stub's name) names itself on this thread, and an
// allocator asks for the innermost name. Off, a call costs one atomic load.
#include <atomic>
#include <string>

namespace ember::detail {

extern std::atomic<bool> g_record_allocation_context;

inline bool recording_allocation_context() {
  return g_record_allocation_context.load(std::memory_order_relaxed);
}

// The innermost name on this thread, or empty.
const std::string& current_allocation_context();

// Names the calls made during its life (when recording was on at its start).
class AllocationContext {
 public:
  explicit AllocationContext(const char* name) {
    if (recording_allocation_context()) push(name);
  }
  explicit AllocationContext(const std::string& name) {
    if (recording_allocation_context()) push(name.c_str());
  }
  ~AllocationContext() {
    if (pushed_) pop();
  }
  AllocationContext(const AllocationContext&) = delete;
  AllocationContext& operator=(const AllocationContext&) = delete;

 private:
  void push(const char* name);
  void pop();
  bool pushed_ = false;
};

}  // namespace ember::detail
