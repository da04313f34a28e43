#pragma once

#include <cstdint>
#include <mutex>

#include "ember/core/device.h"
#include "ember/core/macros.h"

namespace ember {

// The state one random op consumes: it draws from Philox stream `offset` under key `seed`.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Set only for ops captured into a CUDA graph (cuda::CUDAGraph): the seed and a base offset then
  // live in device memory that the graph rewrites before each replay, so every replay draws new
  // numbers. The draw's seed is *seed_ptr and its offset *offset_ptr + offset.
  const uint64_t* seed_ptr = nullptr;
  const uint64_t* offset_ptr = nullptr;

  // The plain state to draw from; a captured state resolves only on the device.
  EMBER_HOST_DEVICE PhiloxState resolved() const {
    return seed_ptr ? PhiloxState{*seed_ptr, *offset_ptr + offset} : *this;
  }
};

// A seeded Philox generator. Each random op takes one fresh offset, so results depend only on
// the seed and the order of random ops, not on threads or devices.
class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;
  PhiloxState next();  // the state for one op, advancing the offset
  // Under a capture these are the capture's relative state (what checkpointing saves and restores
  // around a recomputation); get_rng_state and manual_seed refuse it.
  PhiloxState get_state() const;
  void set_state(PhiloxState s);

  // CUDA graph capture: from begin_capture, next() hands out offsets relative to the base at
  // `offset_ptr`, read with the seed at `seed_ptr` when the kernels run. end_capture returns how
  // many offsets the captured ops took: each replay advances the generator by that many.
  void begin_capture(const uint64_t* seed_ptr, const uint64_t* offset_ptr);
  uint64_t end_capture();
  bool capturing() const;

  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const uint64_t* capture_seed_ = nullptr;  // non-null while capturing
  const uint64_t* capture_offset_ = nullptr;
  uint64_t capture_taken_ = 0;
};

// The process-wide generator of a device type (as torch's default generators).
Generator& default_generator(DeviceType type = kCPU);

// Seeds every default generator, as torch.manual_seed.
void manual_seed(uint64_t seed);

}  // namespace ember
