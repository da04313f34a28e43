// nonzero's CUDA kernel: a thread per element; a selected one writes its coordinates in the row
// its running count gives it.
#include "ember/core/ops/nonzero.h"
#include "ember/cuda/launch.cuh"
#include "ember/cuda/offset_calc.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

struct Sizes {
  int dims;
  int64_t size[kMaxOffsetDims];
};

__global__ void nonzero_kernel(int64_t* out, const int64_t* count, int64_t numel, Sizes s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (count[i] == (i > 0 ? count[i - 1] : 0)) continue;
    int64_t* row = out + (count[i] - 1) * s.dims;
    int64_t rest = i;
    for (int d = s.dims - 1; d >= 0; --d) row[d] = rest % s.size[d], rest /= s.size[d];
  }
}

void nonzero_cuda(const Tensor& out, const Tensor& count, IntArrayRef sizes) {
  EMBER_CHECK(sizes.size() <= static_cast<size_t>(kMaxOffsetDims), "nonzero: at most ", kMaxOffsetDims,
              " dims on CUDA, got ", sizes.size());
  Sizes s{static_cast<int>(sizes.size()), {}};
  for (size_t d = 0; d < sizes.size(); ++d) s.size[d] = sizes[d];
  const int64_t numel = count.numel();
  nonzero_kernel<<<grid_for(numel, kThreads), kThreads, 0, current_stream()>>>(
      static_cast<int64_t*>(out.data_ptr()), static_cast<const int64_t*>(count.data_ptr()), numel, s);
  EMBER_CUDA_LAUNCH_CHECK();
}

KernelRegistrar<NonzeroFn> reg_nonzero(nonzero_stub, kCUDA, &nonzero_cuda);

}  // namespace
}  // namespace ember::cuda
