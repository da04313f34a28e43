#include "ember/core/generator.h"

#include "ember/core/error.h"

namespace ember {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> g(mutex_);
  EMBER_CHECK(!capture_seed_,
              "manual_seed: the generator is in use by a CUDA graph capture; seed it before "
              "capture_begin or after capture_end");
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> g(mutex_);
  return seed_;
}

PhiloxState Generator::next() {
  std::lock_guard<std::mutex> g(mutex_);
  if (capture_seed_) return {0, capture_taken_++, capture_seed_, capture_offset_};
  return {seed_, offset_++};
}

PhiloxState Generator::get_state() const {
  std::lock_guard<std::mutex> g(mutex_);
  if (capture_seed_) return {0, capture_taken_, capture_seed_, capture_offset_};
  return {seed_, offset_};
}

void Generator::set_state(PhiloxState s) {
  std::lock_guard<std::mutex> g(mutex_);
  EMBER_CHECK(s.seed_ptr == capture_seed_ && s.offset_ptr == capture_offset_, "Generator::set_state: ",
              capture_seed_
                  ? "the generator is capturing a CUDA graph, and the state is not from that capture"
                  : "the state is from a CUDA graph capture that has ended");
  if (capture_seed_) {
    capture_taken_ = s.offset;
  } else {
    seed_ = s.seed;
    offset_ = s.offset;
  }
}

void Generator::begin_capture(const uint64_t* seed_ptr, const uint64_t* offset_ptr) {
  std::lock_guard<std::mutex> g(mutex_);
  EMBER_CHECK(!capture_seed_, "CUDAGraph::capture_begin: the generator is already in use by another capture");
  EMBER_CHECK(seed_ptr && offset_ptr, "Generator::begin_capture: null seed or offset pointer");
  capture_seed_ = seed_ptr;
  capture_offset_ = offset_ptr;
  capture_taken_ = 0;
}

uint64_t Generator::end_capture() {
  std::lock_guard<std::mutex> g(mutex_);
  capture_seed_ = capture_offset_ = nullptr;
  return capture_taken_;
}

bool Generator::capturing() const {
  std::lock_guard<std::mutex> g(mutex_);
  return capture_seed_ != nullptr;
}

Generator& default_generator(DeviceType type) {
  static Generator generators[kNumDeviceTypes];
  return generators[static_cast<int>(type)];
}

void manual_seed(uint64_t seed) {
  for (int i = 0; i < kNumDeviceTypes; ++i) default_generator(static_cast<DeviceType>(i)).manual_seed(seed);
}

}  // namespace ember
