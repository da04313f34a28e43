#pragma once

// What every kernel file needs: grid sizing and warp/block reductions (STYLE.md #6).
#include <cuda_runtime.h>

#include <cstdint>

#include "ember/cuda/check.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {

constexpr int kWarpSize = 32;

template <class T>
constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Blocks for n elements at `per_block` each, capped at what keeps every SM busy; kernels use a
// grid-stride loop beyond that.
inline unsigned grid_for(int64_t n, int per_block, int64_t max_blocks = 65535LL * 8) {
  int64_t b = ceil_div<int64_t>(n, per_block);
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces over the whole block; every thread gets the result. `shared` holds one T per warp
// (at least blockDim.x / 32). Call from all threads of the block.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T* shared) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_reduce(v, op);
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < nwarps ? shared[lane] : identity;
  if (warp == 0) v = warp_reduce(v, op);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  return shared[0];
}

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

}  // namespace ember::cuda
