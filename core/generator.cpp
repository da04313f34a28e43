#include "ember/core/generator.h"

namespace ember {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> g(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> g(mutex_);
  return seed_;
}

PhiloxState Generator::next() {
  std::lock_guard<std::mutex> g(mutex_);
  return {seed_, offset_++};
}

PhiloxState Generator::get_state() const {
  std::lock_guard<std::mutex> g(mutex_);
  return {seed_, offset_};
}

void Generator::set_state(PhiloxState s) {
  std::lock_guard<std::mutex> g(mutex_);
  seed_ = s.seed;
  offset_ = s.offset;
}

Generator& default_generator(DeviceType type) {
  static Generator generators[kNumDeviceTypes];
  return generators[static_cast<int>(type)];
}

void manual_seed(uint64_t seed) {
  for (int i = 0; i < kNumDeviceTypes; ++i) default_generator(static_cast<DeviceType>(i)).manual_seed(seed);
}

}  // namespace ember
