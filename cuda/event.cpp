#include "ember/cuda/event.h"

#include <utility>

#include "ember/cuda/check.h"
#include "ember/cuda/device_error.h"

namespace ember::cuda {

Event::~Event() {
  if (event_) cudaEventDestroy(event_);  // a destructor must not throw
}

Event::Event(Event&& other) noexcept
    : enable_timing_(other.enable_timing_),
      device_(std::exchange(other.device_, -1)),
      event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    enable_timing_ = other.enable_timing_;
    device_ = std::exchange(other.device_, -1);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device_index());
  if (!event_) {
    EMBER_CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, enable_timing_ ? cudaEventDefault : cudaEventDisableTiming));
    device_ = stream.device_index();
  }
  EMBER_CHECK(device_ == stream.device_index(), "Event::record: the event was created on cuda:", device_,
              ", the stream is on cuda:", stream.device_index());
  EMBER_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::wait() const { wait(current_stream()); }

void Event::wait(const Stream& stream) const {
  if (!event_) return;
  DeviceGuard guard(stream.device_index());
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool Event::query() const {
  if (!event_) return true;
  cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(err);
  return true;
}

void Event::synchronize() const {
  if (!event_) return;
  EMBER_CUDA_CHECK(cudaEventSynchronize(event_));
  raise_device_errors();
}

float Event::elapsed_time(const Event& end) const {
  EMBER_CHECK(enable_timing_ && end.enable_timing_,
              "Event::elapsed_time: both events must be created with enable_timing=true");
  EMBER_CHECK(event_ && end.event_, "Event::elapsed_time: both events must be recorded first");
  end.synchronize();
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

}  // namespace ember::cuda
