#pragma once

// What every kernel file needs: grid sizing and warp/block reductions (STYLE.md #6).
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
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

// Programmatic dependent launch (Hopper and later): a kernel started by launch_dependent may be
// scheduled while the kernel before it in the stream drains, so its launch and prologue overlap
// that kernel's tail. It must call wait_for_prior_grids() before it reads or writes global
// memory (the wait returns once the grid before it has finished and its writes are visible);
// that grid may call allow_dependent_grids() to let its dependent be scheduled before it exits.
// Both are no-ops in a kernel launched the ordinary way. Measured on the H200: layer_norm
// fwd+bwd bf16 [32768, 1024] 98.1 -> 95.7 us with its backward and column-sum kernels so launched,
// 95.5 -> 94.4 us with its forward as well.
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = get_device_properties().major >= 9 ? 1 : 0;
  EMBER_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
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
