#pragma once

#include <cstdint>

#include "ember/core/error.h"
#include "ember/core/philox.h"

namespace ember::data::transforms {

// The random numbers of one sample's transforms: a Philox stream made from (seed, epoch, sample
// index) alone, so an augmented sample is the same whichever worker thread builds it, and a
// resumed run draws exactly what the first run drew. The transforms of a Compose draw from it in
// order.
class SampleRandom {
 public:
  SampleRandom(uint64_t seed, int64_t epoch, int64_t index) {
    // The sample's key is a Philox block of (index, epoch) under `seed`. The tag in the top counter
    // word keeps these blocks apart from the streams a Generator(seed) draws (its offsets never
    // reach 2^32 * kTag), so a shuffle with the same seed is not correlated with the augmentation.
    constexpr uint32_t kTag = 0x7472616eu;  // "tran"
    const auto e = static_cast<uint64_t>(epoch), i = static_cast<uint64_t>(index);
    Philox4x32 k = philox4x32_10(static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                 static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32) ^ kTag,
                                 static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    key0_ = k.v[0];
    key1_ = k.v[1];
  }

  uint32_t next_u32() {
    if (used_ == 4) {
      block_ = philox4x32_10(counter_, 0, 0, 0, key0_, key1_);
      ++counter_;
      used_ = 0;
    }
    return block_.v[used_++];
  }

  // Uniform in [0, n) by Lemire's multiply-shift (its bias is below n / 2^32).
  int64_t randint(int64_t n) {
    EMBER_CHECK(n >= 1 && n <= (int64_t{1} << 32), "SampleRandom: randint needs 1 <= n <= 2^32, got ", n);
    return static_cast<int64_t>((static_cast<uint64_t>(next_u32()) * static_cast<uint64_t>(n)) >> 32);
  }

  float uniform() { return uniform_float(next_u32()); }  // [0, 1)

 private:
  uint32_t key0_, key1_;
  uint32_t counter_ = 0;  // the next block
  Philox4x32 block_{};
  int used_ = 4;
};

}  // namespace ember::data::transforms
