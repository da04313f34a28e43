// NVTX through the header-only nvtx3 of the CUDA toolkit: nothing to link; the calls are cheap
// no-ops unless a tool (Nsight Systems) has injected its library.
#include "ember/cuda/nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include "ember/core/dispatch.h"

namespace ember::cuda::nvtx {
namespace {

void push(const char* name) { nvtxRangePushA(name); }
void pop() { nvtxRangePop(); }
void push_op(detail::OpRangeKind kind, const char* op, const std::string*) {
  nvtxRangePushA(detail::op_range_name(kind, op).c_str());
}
// NVTX copies the message, so a module's name needs nothing more.
constexpr detail::KernelRangeHooks kNvtxHooks{&push, &pop, nullptr, &push, &push_op};

}  // namespace

void range_push(const char* msg) { nvtxRangePushA(msg); }
void range_pop() { nvtxRangePop(); }
void mark(const char* msg) { nvtxMarkA(msg); }

// The hooks have one owner at a time: NVTX never replaces or removes another's (a profiler session).
void set_emit_nvtx(bool enabled) {
  const detail::KernelRangeHooks* expected = enabled ? nullptr : &kNvtxHooks;
  if (detail::g_kernel_range_hooks.compare_exchange_strong(expected, enabled ? &kNvtxHooks : nullptr,
                                                           std::memory_order_acq_rel))
    return;
  EMBER_CHECK(!enabled || expected == &kNvtxHooks,
              "cuda::nvtx::set_emit_nvtx: the kernel-range hooks are in use (a profiler::Profile session "
              "is running?); emit_nvtx and profiling cannot run together");
}
bool emit_nvtx_enabled() {
  return detail::g_kernel_range_hooks.load(std::memory_order_acquire) == &kNvtxHooks;
}

}  // namespace ember::cuda::nvtx
