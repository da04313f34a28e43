#pragma once

#include <vector>

#include "ember/core/autocast_mode.h"
#include "ember/core/tensor.h"
#include "ember/cuda/caching_allocator.h"

// CUDA's handle types, declared as cuda_runtime.h does: this header has no CUDA types, so a build
// without CUDA has it too (cuda/no_cuda/graph.cpp: capturing throws "ember was built without CUDA").
struct CUgraphExec_st;
struct CUstream_st;

// CUDA graphs (torch.cuda.CUDAGraph, torch.cuda.graph): a piece of GPU work captured once and
// replayed with one launch, which takes the per-kernel launch cost (3.7-4.6 us on an H200, about
// 0.8 us inside a graph) out of a step. A replay runs the captured kernels on the captured
// memory: inputs are copied into the tensors the capture read (static inputs), and results are
// read from the tensors it wrote. What the capture allocates comes from the graph's private pool
// (caching_allocator.cpp), so nothing else is handed that memory while the graph lives.
//
// Random ops draw from the default CUDA generator as usual: during a capture they read the seed
// and a base offset from device memory that each replay rewrites from the generator, which then
// advances as the eager ops would have (so a replay draws new numbers, the ones the same ops run
// eagerly would have drawn). Other generators are not graph-safe: a capture bakes in their state.
//
// Autocast's kept casts of parameters (core/autocast_mode.h) that a capture reads or a fused step
// in it writes stay the parameters' casts through the replays: each replay first casts anew those
// whose parameter changed outside the graph (load_state_dict, an in-place op, an eager step that
// did not write the cast), so a captured training step casts no parameters.
//
// Waiting for the GPU cannot be captured: item(), copies to the host, ops whose output size
// depends on the GPU's values (one_hot without num_classes), and empty_cache raise an ember::Error
// naming the op during a capture. Run a step eagerly a few times first (on the capture's stream),
// so that one-time work (cuDNN and cuBLASLt plan choices, first allocations) is done before it.
namespace ember::cuda {

class Stream;

// Which CUDA calls a capture refuses (cudaStreamCaptureMode). Global, the default (as PyTorch's),
// refuses unsafe calls on every thread while the capture runs; ThreadLocal only on the capturing
// thread; Relaxed none.
enum class CaptureErrorMode { Global, ThreadLocal, Relaxed };

// A new memory pool id for graphs that share one pool (torch.cuda.graph_pool_handle): pass it to
// each capture; the graphs must then replay in the order they were captured.
MempoolId graph_pool_handle();

// Whether the calling thread's current stream is capturing (torch.cuda.is_current_stream_capturing).
bool is_current_stream_capturing();

class CUDAGraph {
 public:
  CUDAGraph() = default;
  ~CUDAGraph();
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  // Captures the work queued on the current stream (not the legacy default stream) until
  // capture_end, allocating from `pool` (a graph_pool_handle or another graph's pool(); default:
  // a pool of its own).
  void capture_begin(MempoolId pool = {}, CaptureErrorMode mode = CaptureErrorMode::Global);
  void capture_end();
  // Launches the captured work on the current stream of the graph's device.
  void replay();
  // Drops the captured work and this graph's hold on its pool; the graph can capture again.
  void reset();

  MempoolId pool() const { return pool_; }
  bool captured() const { return exec_ != nullptr; }

 private:
  friend class graph;
  void finish_capture();   // the allocator and the generator leave capture mode
  void abandon_capture();  // ends a capture that failed, keeping nothing

  CUgraphExec_st* exec_ = nullptr;
  MempoolId pool_{0, 0};
  bool holds_pool_ = false;
  int device_ = -1;
  CUstream_st* stream_ = nullptr;  // the capturing stream, while capturing
  unsigned long long capture_id_ = 0;
  bool capturing_ = false;
  Tensor rng_state_;          // [seed, base offset] that captured random ops read, rewritten per replay
  uint64_t rng_offsets_ = 0;  // generator offsets the captured ops take
  std::vector<amp::detail::KeptCastUse> kept_casts_;  // read or written by the captured work
};

// For its scope, captures into `g` (torch.cuda.graph): waits for the device, makes `stream` (by
// default one side stream per device kept for captures) current, and calls capture_begin; the
// scope's end calls capture_end and restores the current device and stream. Leaving by an
// exception abandons the capture (the graph stays empty); otherwise a failed capture_end throws
// from the destructor.
class graph {
 public:
  explicit graph(CUDAGraph& g, MempoolId pool = {}, const Stream* stream = nullptr,
                 CaptureErrorMode mode = CaptureErrorMode::Global);
  ~graph() noexcept(false);
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

 private:
  CUDAGraph& g_;
  int previous_device_;
  CUstream_st* previous_stream_;  // current on the capture's device before the scope
  int uncaught_;
};

namespace detail {
// Whether any CUDA graph capture is underway in the process (what sync points check).
bool capture_underway();
}  // namespace detail

}  // namespace ember::cuda
