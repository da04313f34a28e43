#pragma once

// Exact GELU and its derivative for f16 and bf16 results, with Phi(x) from
// erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), and the fast reciprocal and exp. On 2-byte
// types instructions, not bytes, bound these kernels; this takes far fewer than erff, and unlike
// 1 + erf(x / sqrt 2), erfc does not cancel for large negative x, so tiny results stay exact
// rather than becoming 0.
// - GELU: P of degree 5 (tools/numerics/fit_normal_cdf.py: erfc's relative error under 1.2e-5 up
//   to z = 14, where x Phi(x) leaves float32's range; Phi(0) exactly 1/2). All bf16 results but
//   2 of the 65280 finite inputs are the rounded exact value, and all f16 ones within 1 ulp of it.
// - Its derivative Phi(x) + x phi(x): Numerical Recipes' erfcc (degree 9, relative error under
//   1.2e-7). The two terms cancel near x = -0.75, where the derivative is 0, so Phi's absolute
//   error must stay far below f16's step there.
#include <cuda_runtime.h>

namespace ember::cuda {

// 1 / y for y >= 1: the reciprocal unit alone (__fdividef's would first test y for a divisor too
// small for it, three more instructions an element, and get the same result here).
__device__ __forceinline__ float reciprocal_of_at_least_one(float y) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return r;
}

// Phi(x) with P(t) = sum of coeffs[i] t^(n - 1 - i) (highest power first).
template <int kN>
__device__ __forceinline__ float normal_cdf(float x, const float (&coeffs)[kN]) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = reciprocal_of_at_least_one(fmaf(0.5f, z, 1.f));
  float p = coeffs[0];
#pragma unroll
  for (int i = 1; i < kN; ++i) p = fmaf(p, t, coeffs[i]);
  const float erfc_z = t * __expf(fmaf(-z, z, p));
  return x >= 0.f ? fmaf(-0.5f, erfc_z, 1.f) : 0.5f * erfc_z;
}

struct GeluReducedPrecision {  // x Phi(x)
  __device__ float operator()(float x) const {
    constexpr float kFit[] = {0.221961111f, -0.689655125f, 0.453439236f,
                              0.265004575f, 1.01558161f,   -1.26633143f};
    return x * normal_cdf(x, kFit);
  }
};

struct GeluBackwardReducedPrecision {  // g (Phi(x) + x phi(x))
  __device__ float operator()(float g, float x) const {
    constexpr float kErfcc[] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f};
    constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
    return g * fmaf(x * kInvSqrt2Pi, __expf(-0.5f * x * x), normal_cdf(x, kErfcc));
  }
};

}  // namespace ember::cuda
