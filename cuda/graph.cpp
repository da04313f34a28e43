#include "ember/cuda/graph.h"

#include <cuda_runtime.h>

#include <atomic>
#include <exception>
#include <mutex>

#include "ember/core/factories.h"
#include "ember/core/generator.h"
#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
#include "ember/cuda/philox_tensor.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {

std::atomic<int> captures_underway{0};

cudaStreamCaptureMode to_cuda(CaptureErrorMode mode) {
  switch (mode) {
    case CaptureErrorMode::ThreadLocal:
      return cudaStreamCaptureModeThreadLocal;
    case CaptureErrorMode::Relaxed:
      return cudaStreamCaptureModeRelaxed;
    default:
      return cudaStreamCaptureModeGlobal;
  }
}

// The side stream cuda::graph captures on by default, one per device, made on first use and kept
// (as torch.cuda.graph's default capture stream), so graphs sharing a pool capture on one stream.
Stream capture_stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams(device_count(), nullptr);
  std::lock_guard<std::mutex> lock(mutex);
  if (!streams[device]) {
    DeviceGuard guard(device);
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
  }
  return Stream(device, streams[device]);
}

}  // namespace

namespace detail {
bool capture_underway() { return captures_underway.load(std::memory_order_relaxed) > 0; }
}  // namespace detail

MempoolId graph_pool_handle() {
  static std::atomic<uint64_t> next{1};
  return {next.fetch_add(1, std::memory_order_relaxed), 0};
}

bool is_current_stream_capturing() {
  if (device_count() == 0) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(current_stream().stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

CUDAGraph::~CUDAGraph() {
  try {
    reset();
  } catch (const Error&) {
    // CUDA is failing or shutting down: what the graph held goes with the context.
  }
}

void CUDAGraph::capture_begin(MempoolId pool, CaptureErrorMode mode) {
  EMBER_CHECK(!capturing_ && !exec_, "CUDAGraph::capture_begin: this graph ",
              capturing_ ? "is already capturing" : "holds a capture already; reset() it first");
  const Stream stream = current_stream();
  EMBER_CHECK(stream.stream() != nullptr,
              "CUDAGraph::capture_begin: the current stream is cuda:", stream.device_index(),
              "'s legacy default stream, which cannot be captured; capture on a side "
              "stream (cuda::graph does)");
  device_ = stream.device_index();
  // Made before the capture, so that it is not part of the graph's pool.
  rng_state_ = zeros({2}, TensorOptions(kInt64).device(Device(kCUDA, device_)));
  const auto* rng = static_cast<const uint64_t*>(rng_state_.data_ptr());
  Generator& gen = default_generator(kCUDA);
  gen.begin_capture(rng, rng + 1);
  pool_ = pool == MempoolId{0, 0} ? graph_pool_handle() : pool;
  cudaError_t err = cudaStreamBeginCapture(stream.stream(), to_cuda(mode));
  if (err == cudaSuccess) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    err = cudaStreamGetCaptureInfo(stream.stream(), &status, &capture_id_);
  }
  if (err != cudaSuccess) {
    gen.end_capture();
    EMBER_CUDA_CHECK(err);
  }
  stream_ = stream.stream();
  capturing_ = true;
  captures_underway.fetch_add(1, std::memory_order_relaxed);
  ember::cuda::detail::begin_allocate_to_pool(device_, pool_, capture_id_);
  holds_pool_ = true;
  amp::detail::record_kept_casts(&kept_casts_);
}

void CUDAGraph::finish_capture() {
  capturing_ = false;
  stream_ = nullptr;
  amp::detail::record_kept_casts(nullptr);
  rng_offsets_ = default_generator(kCUDA).end_capture();
  captures_underway.fetch_sub(1, std::memory_order_relaxed);
  ember::cuda::detail::end_allocate_to_pool(device_, capture_id_);
}

void CUDAGraph::capture_end() {
  EMBER_CHECK(capturing_, "CUDAGraph::capture_end: the graph is not capturing (no capture_begin)");
  EMBER_CHECK(current_stream(device_).stream() == stream_,
              "CUDAGraph::capture_end: the current stream is not the one capture_begin captured");
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream_, &graph);
  finish_capture();
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    reset();
    throw Error(ember::detail::str_cat(
        "CUDAGraph::capture_end: the capture failed (", cudaGetErrorString(err),
        "): something during it was not capturable, such as a synchronization, a legacy-stream launch, or "
        "another thread's unsafe CUDA call under CaptureErrorMode::Global"));
  }
  DeviceGuard guard(device_);
  const cudaError_t inst = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    exec_ = nullptr;
    reset();
    EMBER_CUDA_CHECK(inst);
  }
}

void CUDAGraph::abandon_capture() {
  if (!capturing_) return;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess) cudaGetLastError();
  if (graph) cudaGraphDestroy(graph);
  finish_capture();
  reset();
}

void CUDAGraph::replay() {
  EMBER_CHECK(exec_, "CUDAGraph::replay: nothing captured (call capture_begin and capture_end first)");
  DeviceGuard guard(device_);
  const Stream stream = current_stream(device_);
  if (rng_offsets_ > 0) {
    // The base the captured draws add their offsets to, then the generator moves past them.
    Generator& gen = default_generator(kCUDA);
    EMBER_CHECK(!gen.capturing(),
                "CUDAGraph::replay: a graph that draws random numbers cannot be replayed "
                "while another graph is being captured");
    const PhiloxState s = gen.get_state();
    write_philox(rng_state_, s);
    record_stream(rng_state_, stream);  // made on the capture's stream, used on this one
    gen.set_state({s.seed, s.offset + rng_offsets_});
  }
  // On the replay's stream (the current one), before the launch.
  for (const amp::detail::KeptCastUse& use : kept_casts_) amp::detail::refresh_kept_cast(use);
  EMBER_CUDA_CHECK(cudaGraphLaunch(exec_, stream.stream()));
}

void CUDAGraph::reset() {
  if (capturing_) {
    abandon_capture();
    return;
  }
  if (exec_) {
    EMBER_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
  }
  if (holds_pool_) {
    ember::cuda::detail::release_pool(device_, pool_);
    holds_pool_ = false;
  }
  pool_ = {0, 0};
  rng_state_ = Tensor();
  rng_offsets_ = 0;
  kept_casts_.clear();
}

graph::graph(CUDAGraph& g, MempoolId pool, const Stream* stream, CaptureErrorMode mode)
    : g_(g), previous_device_(current_device()), uncaught_(std::uncaught_exceptions()) {
  const Stream s = stream ? *stream : capture_stream(previous_device_);
  previous_stream_ = current_stream(s.device_index()).stream();
  set_device(s.device_index());
  set_current_stream(s);
  try {
    // Work queued before the capture finishes first, as torch.cuda.graph does.
    synchronize();
    g_.capture_begin(pool, mode);
  } catch (...) {
    set_current_stream(Stream(s.device_index(), previous_stream_));
    set_device(previous_device_);
    throw;
  }
}

graph::~graph() noexcept(false) {
  const int device = g_.device_;
  auto restore = [&] {
    set_current_stream(Stream(device, previous_stream_));
    set_device(previous_device_);
  };
  if (std::uncaught_exceptions() > uncaught_) {
    g_.abandon_capture();
    restore();
    return;
  }
  try {
    g_.capture_end();
  } catch (...) {
    g_.abandon_capture();
    restore();
    throw;
  }
  restore();
}

}  // namespace ember::cuda
