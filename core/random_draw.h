#pragma once

// What element i of a random draw is: a function of the generator state and i alone, shared by
// the CPU kernel (core/cpu/random_kernel.cpp) and the CUDA one (cuda/random_kernels.cu), so a
// draw gives the same numbers bit for bit on either device.
//
// Philox block `b` (four 32-bit words) yields k consecutive elements, b * k + j for j < k:
//  - uniform, normal and bernoulli in float precision (every dtype but float64): k = 4. Uniform
//    element j takes 24 bits of word j, and bernoulli element j is that uniform below p (as
//    PyTorch's dropout draws its mask); normals come from Box-Muller on the word pairs (0, 1) and
//    (2, 3), the cosine for the first element of a pair, the sine for the second.
//  - uniform, normal and bernoulli in double precision (float64): k = 2. Uniform element j takes
//    53 bits of words (2j, 2j + 1); the normal pair is Box-Muller on (words 0-1, words 2-3), cos
//    then sin.
//  - randint (64 bits of words (2j, 2j + 1), modulo the range): k = 2.
// The arithmetic is IEEE adds, multiplies, divisions and square roots in double, each rounded
// once (no library log/sin/cos, whose last bits differ between libm and CUDA, and no fused
// multiply-adds, which nvcc would otherwise form), so both devices round alike.

#include <cmath>
#include <cstring>
#include <type_traits>

#include "ember/core/generator.h"
#include "ember/core/philox.h"
#include "ember/core/random.h"

namespace ember::random_draw {

EMBER_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

EMBER_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// c0 + z (c1 + z (c2 + ...)).
EMBER_HOST_DEVICE inline double horner(double, double c) { return c; }
template <class... Rest>
EMBER_HOST_DEVICE inline double horner(double z, double c, Rest... rest) {
  return add_rn(mul_rn(horner(z, rest...), z), c);
}

// log(x) for x in [2^-53, 1] (1 - a uniform): x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
// log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its series to s^21 (error below
// 2^-56 relative).
EMBER_HOST_DEVICE inline double log_unit(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof(u));
  int e = static_cast<int>(u >> 52) - 1022;  // x is normal and positive
  u = (u & 0x000fffffffffffffull) | 0x3fe0000000000000ull;
  double m;
  memcpy(&m, &u, sizeof(m));  // in [0.5, 1)
  if (m < 0.7071067811865476) {
    m = m + m;
    --e;
  }
  const double f = m - 1.0;  // exact
  const double s = f / (2.0 + f), z = mul_rn(s, s);
  const double series = horner(z, 1.0, 0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111,
                               0.09090909090909091, 0.07692307692307693, 0.06666666666666667,
                               0.058823529411764705, 0.05263157894736842, 0.047619047619047616);
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double de = static_cast<double>(e);  // de * kLn2Hi is exact: kLn2Hi has 32 bits
  return add_rn(mul_rn(de, kLn2Hi), add_rn(mul_rn(de, kLn2Lo), mul_rn(s + s, series)));
}

// sin and cos of 2 pi u for u in [0, 1): u = q / 4 + r exactly, |r| <= 1/8, then the Taylor
// series of t = 2 pi r (|t| <= pi / 4) to t^17 and t^18, and the quadrant q.
EMBER_HOST_DEVICE inline void sincos_2pi(double u, double& sin_out, double& cos_out) {
  const int q = static_cast<int>(4.0 * u + 0.5);
  const double t = mul_rn(u - 0.25 * q, 6.283185307179586), z = mul_rn(t, t);
  const double s = mul_rn(t, horner(z, 1.0, -0.16666666666666666, 0.008333333333333333,
                                    -0.0001984126984126984, 2.7557319223985893e-06, -2.505210838544172e-08,
                                    1.6059043836821613e-10, -7.647163731819816e-13, 2.8114572543455206e-15));
  const double c = horner(z, 1.0, -0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05,
                          -2.755731922398589e-07, 2.08767569878681e-09, -1.1470745597729725e-11,
                          4.779477332387385e-14, -1.5619206968586225e-16);
  switch (q & 3) {
    case 0:
      sin_out = s, cos_out = c;
      break;
    case 1:
      sin_out = c, cos_out = -s;
      break;
    case 2:
      sin_out = -s, cos_out = -c;
      break;
    default:
      sin_out = -c, cos_out = s;
      break;
  }
}

// Elements per Philox block for a draw of `kind` in precision C (float or double).
template <class C>
EMBER_HOST_DEVICE constexpr int block_size(RandomKind kind) {
  return kind != RandomKind::Integer && !std::is_same_v<C, double> ? 4 : 2;
}

// uniform_float(x) < p exactly when x >> 8 < bernoulli_threshold(p) = ceil(p * 2^24): a float
// Bernoulli draw as an integer compare, not a float-to-double conversion (a quarter-rate
// instruction on the GPU) per element.
EMBER_HOST_DEVICE inline uint32_t bernoulli_threshold(double p) {
  return p > 0 ? (p < 1 ? static_cast<uint32_t>(std::ceil(p * 0x1p24)) : 1u << 24) : 0u;
}

// Writes elements b * k + j, j in [first, last), of a draw into out[0, last - first): T is the
// output's type, C (double for float64 outputs, else float) the precision of the draw, (a, b) the
// kind's parameters (from, to; mean, std; p; low, high).
template <class T, class C>
EMBER_HOST_DEVICE inline void fill_block(RandomKind kind, PhiloxState s, double a, double b, uint64_t block,
                                         int first, int last, T* out) {
  constexpr bool kDouble = std::is_same_v<C, double>;
  const Philox4x32 r = philox_block(s.seed, s.offset, block);
  auto uniform64 = [&r](int j) { return uniform_double(r.v[2 * j], r.v[2 * j + 1]); };
  auto put = [&](int j, double v) {
    if (j >= first && j < last) out[j - first] = static_cast<T>(static_cast<C>(v));
  };
  switch (kind) {
    case RandomKind::Uniform:
      for (int j = first; j < last; ++j)
        put(j, add_rn(a, mul_rn(b - a, kDouble ? uniform64(j) : uniform_float(r.v[j]))));
      break;
    case RandomKind::Normal:
      for (int pair = first / 2; pair <= (last - 1) / 2; ++pair) {
        const double u1 = kDouble ? uniform64(0) : uniform_float(r.v[2 * pair]);
        const double u2 = kDouble ? uniform64(1) : uniform_float(r.v[2 * pair + 1]);
        const double radius = std::sqrt(-2.0 * log_unit(1.0 - u1));
        double sin_t, cos_t;
        sincos_2pi(u2, sin_t, cos_t);
        put(2 * pair, add_rn(a, mul_rn(b, mul_rn(radius, cos_t))));
        put(2 * pair + 1, add_rn(a, mul_rn(b, mul_rn(radius, sin_t))));
      }
      break;
    case RandomKind::Bernoulli:
      if constexpr (kDouble) {
        for (int j = first; j < last; ++j) out[j - first] = static_cast<T>(uniform64(j) < a);
      } else {
        const uint32_t t = bernoulli_threshold(a);
        for (int j = first; j < last; ++j) out[j - first] = static_cast<T>((r.v[j] >> 8) < t);
      }
      break;
    case RandomKind::Integer: {
      const auto range = static_cast<uint64_t>(b - a);
      for (int j = first; j < last; ++j) {
        uint64_t bits = static_cast<uint64_t>(r.v[2 * j]) << 32 | r.v[2 * j + 1];
        out[j - first] = static_cast<T>(static_cast<int64_t>(a) + static_cast<int64_t>(bits % range));
      }
      break;
    }
  }
}

}  // namespace ember::random_draw
