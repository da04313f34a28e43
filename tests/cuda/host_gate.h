#pragma once

#include <ember/cuda/check.h>

#include <atomic>
#include <chrono>
#include <functional>
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

// Runs `fn` with `stream` held behind a HostGate and returns whether it came back while the
// gate was still closed. A call that waits for the device would wait forever; a watchdog opens
// the gate after `timeout`, so the test fails instead of hanging. Exceptions from fn propagate.
inline bool returns_without_waiting(cudaStream_t stream, const std::function<void()>& fn,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  std::atomic<bool> returned{false}, timed_out{false};
  HostGate gate(stream);
  std::thread watchdog([&] {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!returned.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    timed_out = !returned.load();
    gate.release();
  });
  try {
    fn();
  } catch (...) {
    returned = true;
    watchdog.join();
    throw;
  }
  returned = true;
  watchdog.join();
  return !timed_out.load();
}

}  // namespace ember::testing
