// arange and linspace on the GPU: the values core/cpu/range_kernel.cpp computes, in double.
#include "ember/core/factories.h"
#include "ember/cuda/elementwise.cuh"

namespace ember::cuda {
namespace {

template <class T>
__global__ void range_kernel(T* out, int64_t n, double start, double end, double step, int64_t half) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Rounded multiply, then add, as the CPU does: a fused multiply-add would round differently.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<T>(i < half ? __dadd_rn(start, __dmul_rn(step, static_cast<double>(i)))
                                     : __dsub_rn(end, __dmul_rn(step, static_cast<double>(n - 1 - i))));
}

void range_cuda(const Tensor& out, double start, double end, double step, int64_t half) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kBlock = 256;
    const int64_t n = out.numel();
    range_kernel<T><<<grid_for(n, kBlock), kBlock, 0, current_stream()>>>(static_cast<T*>(out.data_ptr()), n,
                                                                          start, end, step, half);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<RangeFn> reg_range(range_stub, kCUDA, &range_cuda);

}  // namespace
}  // namespace ember::cuda
