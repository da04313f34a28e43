// NVTX through the header-only nvtx3 of the CUDA toolkit: nothing to link; the calls are cheap
// no-ops unless a tool (Nsight Systems) has injected its library.
#include "ember/cuda/nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include "ember/core/dispatch.h"

namespace ember::cuda::nvtx {
namespace {

void push(const char* name) { nvtxRangePushA(name); }
void pop() { nvtxRangePop(); }
constexpr detail::KernelRangeHooks kNvtxHooks{&push, &pop};

}  // namespace

void range_push(const char* msg) { nvtxRangePushA(msg); }
void range_pop() { nvtxRangePop(); }
void mark(const char* msg) { nvtxMarkA(msg); }

void set_emit_nvtx(bool enabled) {
  detail::g_kernel_range_hooks.store(enabled ? &kNvtxHooks : nullptr, std::memory_order_release);
}
bool emit_nvtx_enabled() { return detail::g_kernel_range_hooks.load(std::memory_order_acquire) != nullptr; }

}  // namespace ember::cuda::nvtx
