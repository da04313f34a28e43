#pragma once

#include <cuda_runtime.h>

#include "ember/core/device.h"
#include "ember/cuda/device.h"

namespace ember::cuda {

// A CUDA stream on a device (c10::cuda::CUDAStream). Ops launch on the current stream of the
// current device. A Stream does not own its handle: pool and default streams live as long as
// the process.
class Stream {
 public:
  Stream(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  int device_index() const { return device_; }
  Device device() const { return Device(kCUDA, device_); }
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  bool operator==(const Stream& o) const { return device_ == o.device_ && stream_ == o.stream_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  // Whether all work queued so far has finished (never blocks).
  bool query() const;
  // Blocks the calling thread until all work queued so far has finished.
  void synchronize() const;
  // Lower numbers run first (CUDA's convention); the default and low-priority streams have 0.
  int priority() const;

 private:
  int device_;
  cudaStream_t stream_;
};

// The calling thread's current stream on `device` (-1: the current device). Each thread starts
// on the default stream, as in PyTorch.
Stream current_stream(int device = -1);

// The legacy default stream of `device`, which synchronizes with every blocking stream.
Stream default_stream(int device = -1);

// A stream from the device's pool (handed out round-robin, created on first use, never
// destroyed). Pool streams do not synchronize with the default stream: order them with events.
Stream get_stream_from_pool(bool high_priority = false, int device = -1);

// Makes `stream` the calling thread's current stream on its device (the current device is
// unchanged).
void set_current_stream(const Stream& stream);

// For its scope: the stream's device is current and the stream is current on it; both are
// restored afterwards (c10::cuda::CUDAStreamGuard).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  DeviceGuard device_guard_;
  Stream original_stream_;  // the previous current stream on the guarded stream's device
};

}  // namespace ember::cuda
