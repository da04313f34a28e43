// CUDA random fills: one thread per Philox block, the values from random_draw::fill_block
// (core/random_draw.h), the same function the CPU kernel uses, so both give the same numbers.
#include "ember/core/factories.h"
#include "ember/core/random_draw.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/philox_tensor.h"

namespace ember::cuda {
namespace {

template <class T, class C>
__global__ void random_kernel(T* out, int64_t n, RandomKind kind, PhiloxState state, double a, double b) {
  constexpr int kMaxBlock = 4;
  const PhiloxState s = state.resolved();
  const int k = random_draw::block_size<C>(kind);
  const int64_t blocks = ceil_div<int64_t>(n, k), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t blk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; blk < blocks; blk += step) {
    const int64_t i = blk * k;
    const int len = static_cast<int>(n - i < k ? n - i : k);
    T vals[kMaxBlock];
    random_draw::fill_block<T, C>(kind, s, a, b, static_cast<uint64_t>(blk), 0, len, vals);
    for (int j = 0; j < len; ++j) out[i + j] = vals[j];
  }
}

void random_fill(const Tensor& out, RandomKind kind, PhiloxState s, double a, double b) {
  EMBER_CHECK(out.is_contiguous(), "random: CUDA kernel expects a contiguous output, got strides ",
              out.strides());
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const int64_t n = out.numel();
    constexpr int kBlock = 256;
    const int64_t blocks = ceil_div<int64_t>(n, random_draw::block_size<C>(kind));
    random_kernel<T, C><<<grid_for(blocks, kBlock), kBlock, 0, current_stream()>>>(
        static_cast<T*>(out.data_ptr()), n, kind, s, a, b);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<RandomFn> reg_random(random_stub, kCUDA, &random_fill);

__global__ void philox_tensor_kernel(uint64_t* out, PhiloxState state, int offset_shift) {
  const PhiloxState s = state.resolved();
  out[0] = s.seed;
  out[1] = s.offset << offset_shift;
}

}  // namespace

void write_philox(const Tensor& out, PhiloxState rng, int offset_shift) {
  EMBER_CHECK(out.is_cuda() && out.dtype() == kInt64 && out.numel() == 2 && out.is_contiguous(),
              "write_philox: expected a contiguous int64 CUDA tensor of 2 elements, got ", out.dtype(), " ",
              out.sizes(), " on ", out.device());
  philox_tensor_kernel<<<1, 1, 0, current_stream(out.device().index)>>>(
      static_cast<uint64_t*>(out.data_ptr()), rng, offset_shift);
  EMBER_CUDA_LAUNCH_CHECK();
}

Tensor philox_tensor(PhiloxState rng, Device device, int offset_shift) {
  Tensor t = empty({2}, TensorOptions(kInt64).device(device));
  write_philox(t, rng, offset_shift);
  return t;
}
}  // namespace ember::cuda
