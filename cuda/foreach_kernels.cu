// CUDA kernel of _foreach_copy_: every pair of a list in multi_tensor_apply launches (48 tensors
// each), moving raw elements of the dtype's width, so one instantiation per element size serves
// every dtype.
#include <cstdint>

#include "ember/core/ops/foreach.h"
#include "ember/cuda/multi_tensor_apply.cuh"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {

// Lists: 0 the sources, 1 the destinations (written, never read).
template <class S>
struct CopyOp {
  static constexpr int kDepth = 2;
  struct PerTensor {};
  __device__ PerTensor per_tensor(const float*) const { return {}; }
  __device__ bool skip() const { return false; }
  __device__ bool loads(int d) const { return d == 0; }
  __device__ bool stores(int d) const { return d == 1; }
  __device__ void operator()(const PerTensor&, S (&e)[kDepth]) const { e[1] = e[0]; }
};

template <class S>
void copy_lists(ArrayRef<Tensor> self, ArrayRef<Tensor> src, cudaStream_t stream) {
  mta::multi_tensor_apply<S>({src, self}, {}, CopyOp<S>{}, stream);
}

void foreach_copy_cuda(ArrayRef<Tensor> self, ArrayRef<Tensor> src) {
  cudaStream_t stream = current_stream(self[0].device().index);
  switch (self[0].element_size()) {
    case 1:
      return copy_lists<uint8_t>(self, src, stream);
    case 2:
      return copy_lists<uint16_t>(self, src, stream);
    case 4:
      return copy_lists<uint32_t>(self, src, stream);
    default:
      return copy_lists<uint64_t>(self, src, stream);
  }
}

KernelRegistrar<ForeachCopyFn> reg(foreach_copy_stub, kCUDA, &foreach_copy_cuda);

}  // namespace
}  // namespace ember::cuda
