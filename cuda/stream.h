#pragma once

#include <cuda_runtime.h>

namespace ember::cuda {

// A CUDA stream on a device. Ops launch on the current stream of the current device.
class Stream {
 public:
  Stream(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  int device_index() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  bool operator==(const Stream& o) const { return device_ == o.device_ && stream_ == o.stream_; }

 private:
  int device_;
  cudaStream_t stream_;
};

// The calling thread's current stream on `device` (-1: the current device).
Stream current_stream(int device = -1);

}  // namespace ember::cuda
