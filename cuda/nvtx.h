#pragma once

// NVTX ranges for Nsight Systems, as torch.cuda.nvtx and torch.autograd.profiler.emit_nvtx.
// Without CUDA they do nothing.

namespace ember::cuda {

namespace nvtx {

// Opens a range on the calling thread's stack; range_pop closes the innermost one.
void range_push(const char* msg);
void range_pop();
// An instant marker.
void mark(const char* msg);

// While on, every kernel call through a DispatchStub runs inside a range named after the stub
// ("conv2d", "cross_entropy_backward", ...), forward and backward alike. Off by default; off costs
// one load per kernel call.
void set_emit_nvtx(bool enabled);
bool emit_nvtx_enabled();

// Turns emit_nvtx on for a scope and restores the previous setting (torch.autograd.profiler.emit_nvtx).
class EmitNvtx {
 public:
  explicit EmitNvtx(bool enabled = true) : previous_(emit_nvtx_enabled()) { set_emit_nvtx(enabled); }
  ~EmitNvtx() { set_emit_nvtx(previous_); }
  EmitNvtx(const EmitNvtx&) = delete;
  EmitNvtx& operator=(const EmitNvtx&) = delete;

 private:
  bool previous_;
};

}  // namespace nvtx

// A range open for the lifetime of the object.
class NvtxRange {
 public:
  explicit NvtxRange(const char* msg) { nvtx::range_push(msg); }
  ~NvtxRange() { nvtx::range_pop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace ember::cuda
