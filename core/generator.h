#pragma once

#include <cstdint>
#include <mutex>

#include "ember/core/device.h"

namespace ember {

// The state one random op consumes: it draws from Philox stream `offset` under key `seed`.
struct PhiloxState {
  uint64_t seed;
  uint64_t offset;
};

// A seeded Philox generator. Each random op takes one fresh offset, so results depend only on
// the seed and the order of random ops, not on threads or devices.
class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;
  PhiloxState next();  // the state for one op, advancing the offset
  PhiloxState get_state() const;
  void set_state(PhiloxState s);

  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator of a device type (as torch's default generators).
Generator& default_generator(DeviceType type = kCPU);

// Seeds every default generator, as torch.manual_seed.
void manual_seed(uint64_t seed);

}  // namespace ember
