#include "ember/cuda/stream.h"

#include <atomic>
#include <mutex>

#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
#include "ember/cuda/device_error.h"

namespace ember::cuda {
namespace {

constexpr int kMaxDevices = 128;    // Device::index is an int8_t
constexpr unsigned kPoolSize = 32;  // streams per priority and device, as in PyTorch

// Null: the legacy default stream, where every thread starts.
thread_local cudaStream_t current_streams[kMaxDevices] = {};

struct StreamPool {
  std::once_flag created;
  cudaStream_t low[kPoolSize] = {};
  cudaStream_t high[kPoolSize] = {};
  std::atomic<unsigned> next_low{0}, next_high{0};

  void create(int device) {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;
    EMBER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (unsigned i = 0; i < kPoolSize; ++i) {
      EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&low[i], cudaStreamNonBlocking, least));
      EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&high[i], cudaStreamNonBlocking, greatest));
    }
  }
};

// One pool per device; never freed, since streams handed out may be used until exit.
StreamPool& pool(int device) {
  static StreamPool* pools = new StreamPool[device_count()];
  return pools[device];
}

}  // namespace

bool Stream::query() const {
  DeviceGuard guard(device_);  // the null stream means the current device's
  cudaError_t err = cudaStreamQuery(stream_);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(err);
  return true;
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_device_errors();
}

int Stream::priority() const {
  DeviceGuard guard(device_);
  int p = 0;
  EMBER_CUDA_CHECK(cudaStreamGetPriority(stream_, &p));
  return p;
}

Stream current_stream(int device) {
  device = detail::resolve_device("current_stream", device);
  return Stream(device, current_streams[device]);
}

Stream default_stream(int device) {
  return Stream(detail::resolve_device("default_stream", device), nullptr);
}

Stream get_stream_from_pool(bool high_priority, int device) {
  device = detail::resolve_device("get_stream_from_pool", device);
  StreamPool& p = pool(device);
  std::call_once(p.created, &StreamPool::create, &p, device);
  std::atomic<unsigned>& next = high_priority ? p.next_high : p.next_low;
  unsigned i = next.fetch_add(1, std::memory_order_relaxed) % kPoolSize;
  return Stream(device, high_priority ? p.high[i] : p.low[i]);
}

void set_current_stream(const Stream& stream) {
  current_streams[detail::resolve_device("set_current_stream", stream.device_index())] = stream.stream();
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_guard_(stream.device_index()), original_stream_(current_stream(stream.device_index())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { current_streams[original_stream_.device_index()] = original_stream_.stream(); }

}  // namespace ember::cuda
