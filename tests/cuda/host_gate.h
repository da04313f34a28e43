#pragma once

#include <ember/cuda/check.h>

#include <atomic>
#include <thread>

namespace ember::testing {

// Holds a stream at a host function until release(): the work queued behind it stays pending,
// so tests can watch ordering, events and deferred reuse without writing a kernel.
class HostGate {
 public:
  explicit HostGate(cudaStream_t stream) {
    EMBER_CUDA_CHECK(cudaLaunchHostFunc(stream, &HostGate::hold, this));
  }
  // Releases and waits until the host function has let go of this object.
  ~HostGate() {
    release();
    while (!done_.load()) std::this_thread::yield();
  }
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;

  void release() { open_.store(true); }

 private:
  static void CUDART_CB hold(void* self) {
    auto* gate = static_cast<HostGate*>(self);
    while (!gate->open_.load()) std::this_thread::yield();
    gate->done_.store(true);
  }

  std::atomic<bool> open_{false}, done_{false};
};

}  // namespace ember::testing
