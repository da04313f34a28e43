#pragma once

#include <cstdint>

#include "ember/core/macros.h"

namespace ember {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so element i's random bits depend only on (seed, offset, i) and the
// CPU and every GPU thread produce the same stream.
struct Philox4x32 {
  uint32_t v[4];
};

EMBER_HOST_DEVICE inline Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                  uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

// The 4 words for block `block` of a draw made with generator state (seed, offset).
EMBER_HOST_DEVICE inline Philox4x32 philox_block(uint64_t seed, uint64_t offset, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// [0, 1) from 24 or 53 random bits.
EMBER_HOST_DEVICE inline float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }
EMBER_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(x) * 0x1p-53;
}

}  // namespace ember
