#pragma once

#include <cuda_runtime.h>

#include "ember/cuda/stream.h"

namespace ember::cuda {

// A CUDA event (torch.cuda.Event): a marker in a stream that other streams can wait on and the
// host can poll. Created on the device of the stream it is first recorded on.
class Event {
 public:
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the point reached by the work queued on `stream` so far (default: the current stream).
  void record();
  void record(const Stream& stream);
  // Makes future work on `stream` wait until this event has completed; no-op before a record.
  void wait() const;
  void wait(const Stream& stream) const;
  // Whether the recorded work has completed (true before any record).
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event to `end`; both recorded with enable_timing. Waits for `end`.
  float elapsed_time(const Event& end) const;

  bool is_created() const { return event_ != nullptr; }
  int device_index() const { return device_; }
  cudaEvent_t event() const { return event_; }

 private:
  bool enable_timing_;
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

}  // namespace ember::cuda
