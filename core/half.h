#pragma once

#include <cstdint>
#include <cstring>

#include "ember/core/macros.h"

namespace ember {

namespace detail {
EMBER_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
EMBER_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

// IEEE binary16, stored as its 16 bits; conversions round to nearest even.
struct Half {
  uint16_t x = 0;
  Half() = default;
  EMBER_HOST_DEVICE Half(float f) : x(from_float(f)) {}
  EMBER_HOST_DEVICE operator float() const { return to_float(x); }

  static constexpr Half from_bits(uint16_t b) {
    Half h;
    h.x = b;
    return h;
  }

  EMBER_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) return static_cast<uint16_t>(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (u >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (u < 0x38800000u) {
      // Subnormal half (or zero): shift the mantissa with the implicit bit, round to nearest even.
      if (u < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
      uint32_t exp = u >> 23;
      uint32_t mant = (u & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - exp;  // 14 + (113 - exp) - 1
      uint32_t half_mant = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
      return static_cast<uint16_t>(sign | half_mant);
    }
    // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
    uint32_t r = u + 0xc8000fffu + ((u >> 13) & 1u);  // -(112 << 23) + 0xfff + lsb
    return static_cast<uint16_t>(sign | (r >> 13));
  }

  EMBER_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
      u = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        u = sign;
      } else {  // subnormal: normalize
        int e = -1;
        do {
          mant <<= 1;
          ++e;
        } while ((mant & 0x400u) == 0);
        u = sign | static_cast<uint32_t>(112 - e) << 23 | (mant & 0x3ffu) << 13;
      }
    } else {
      u = sign | (exp + 112) << 23 | mant << 13;
    }
    return detail::bits_float(u);
  }
};

// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  EMBER_HOST_DEVICE BFloat16(float f) : x(from_float(f)) {}
  EMBER_HOST_DEVICE operator float() const { return detail::bits_float(static_cast<uint32_t>(x) << 16); }

  static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.x = b;
    return h;
  }

  EMBER_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

}  // namespace ember
