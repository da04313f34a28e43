#pragma once

// Element offsets of several strided operands that share one shape, from a linear index: what the
// kernels that read or write through arbitrary views (gather, scatter, sort, BCE) use instead of
// making their operands contiguous first.
#include <array>

#include "ember/core/error.h"
#include "ember/core/small_vector.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {

constexpr int kMaxOffsetDims = 12;

template <int N>
struct OffsetCalc {
  int dims;
  bool narrow;                         // every linear index fits in 32 bits: divide in 32 bits
  int64_t sizes[kMaxOffsetDims];       // innermost dim first
  int64_t strides[kMaxOffsetDims][N];  // in elements, per operand

  // off[k] = the element offset of operand k at the linear index i (row-major over the shape).
  __device__ __forceinline__ void get(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxOffsetDims; ++d) {
      if (d == dims) break;
      int64_t q;
      if (narrow) {
        q = static_cast<uint32_t>(i) / static_cast<uint32_t>(sizes[d]);
      } else {
        q = i / sizes[d];
      }
      const int64_t r = i - q * sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
      i = q;
    }
  }
};

// The calculator for operands of shape `sizes` with strides `strides[k]` (elements), dims of
// size 1 dropped and neighbours that every operand walks as one merged. `op` names the caller
// when more than kMaxOffsetDims dims remain.
template <int N>
OffsetCalc<N> make_offset_calc(const char* op, IntArrayRef sizes, const std::array<IntArrayRef, N>& strides) {
  OffsetCalc<N> c{};
  int64_t numel = 1;
  // Walk from the innermost dim out, merging dim d into the current (inner) one when possible.
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    numel *= sizes[d];
    if (sizes[d] == 1) continue;
    bool merge = c.dims > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = strides[k][d] == c.strides[c.dims - 1][k] * c.sizes[c.dims - 1];
    if (merge) {
      c.sizes[c.dims - 1] *= sizes[d];
      continue;
    }
    EMBER_CHECK(c.dims < kMaxOffsetDims, op, ": CUDA kernel supports at most ", kMaxOffsetDims,
                " dims that cannot be merged, got sizes ", sizes);
    c.sizes[c.dims] = sizes[d];
    for (int k = 0; k < N; ++k) c.strides[c.dims][k] = strides[k][d];
    ++c.dims;
  }
  c.narrow = numel <= static_cast<int64_t>(UINT32_MAX);
  return c;
}

}  // namespace ember::cuda
