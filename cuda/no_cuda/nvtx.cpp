// NVTX without CUDA: ranges and markers do nothing; the emit_nvtx switch is kept so that code
// setting it builds and runs the same.
#include <atomic>

#include "ember/cuda/nvtx.h"

namespace ember::cuda::nvtx {
namespace {
std::atomic<bool> g_emit{false};
}  // namespace

void range_push(const char*) {}
void range_pop() {}
void mark(const char*) {}
void set_emit_nvtx(bool enabled) { g_emit = enabled; }
bool emit_nvtx_enabled() { return g_emit; }

}  // namespace ember::cuda::nvtx
