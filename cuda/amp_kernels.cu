// CUDA kernels of the GradScaler's ops: the inf/NaN check and unscale of all gradients of one
// dtype in one multi_tensor_apply pass, and the one-thread scale update. Both read and write
// their scalars on the device: no host sync.
#include <cmath>

#include "ember/core/ops/amp_functors.h"
#include "ember/core/ops/amp_ops.h"
#include "ember/core/ops/fused_optim_functors.h"
#include "ember/cuda/launch.cuh"
#include "ember/cuda/multi_tensor_apply.cuh"

namespace ember::cuda {
namespace {

template <class S>
struct UnscaleOp {
  static constexpr int kDepth = 1;
  using T = ops::OptimMath<S>;
  float* found_inf;
  const float* inv_scale;

  struct PerTensor {
    T inv;
  };
  __device__ PerTensor per_tensor(const float*) const { return {static_cast<T>(*inv_scale)}; }
  __device__ bool skip() const { return false; }
  __device__ bool stores(int) const { return true; }
  __device__ void operator()(const PerTensor& c, S (&e)[kDepth]) const {
    T v = static_cast<T>(e[0]);
    if (!std::isfinite(v)) *found_inf = 1.f;  // every writer writes the same value
    e[0] = static_cast<S>(c.inv == T(1) ? v : v * c.inv);
  }
};

void amp_unscale_cuda(ArrayRef<Tensor> tensors, const Tensor& found_inf, const Tensor& inv_scale) {
  cudaStream_t stream = current_stream(tensors[0].device().index);
  ops::visit_optim_dtype(tensors[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    UnscaleOp<S> op{found_inf.data_ptr<float>(), inv_scale.data_ptr<float>()};
    mta::multi_tensor_apply<S>({tensors}, {}, op, stream);
  });
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                    double growth_factor, double backoff_factor, int64_t growth_interval) {
  ops::update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
}

void amp_update_scale_cuda(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                           double growth_factor, double backoff_factor, int64_t growth_interval) {
  update_scale_kernel<<<1, 1, 0, current_stream(scale.device().index)>>>(
      scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.data_ptr<float>(), growth_factor,
      backoff_factor, growth_interval);
  EMBER_CUDA_LAUNCH_CHECK();
}

KernelRegistrar<AmpUnscaleFn> unscale_reg(amp_unscale_stub, kCUDA, &amp_unscale_cuda);
KernelRegistrar<AmpUpdateScaleFn> update_reg(amp_update_scale_stub, kCUDA, &amp_update_scale_cuda);

}  // namespace
}  // namespace ember::cuda
