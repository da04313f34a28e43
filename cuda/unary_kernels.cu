// CUDA kernels of the unary elementwise ops: the shared functors (core/ops/elementwise_functors.h)
// through the generic launcher (GELU of 2-byte floats with its own functor).
#include "ember/core/ops/elementwise.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/gelu_reduced_precision.cuh"

namespace ember::cuda {
namespace {

void unary_kernel(ops::UnaryOp op, const Tensor& out, const Tensor& in, const ops::ElementwiseParams& p) {
  ElementwisePlan plan({out, in});
  if (op == ops::UnaryOp::Gelu && (out.dtype() == kBFloat16 || out.dtype() == kFloat16))
    return gpu_kernel<float, 1>(plan, GeluReducedPrecision{});
  visit_compute_type(out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>)  // bool only reaches sign, a copy
      gpu_kernel<bool, 1>(plan, Identity{});
    else
      ops::visit_unary<C>(op, p, [&](auto f) { gpu_kernel<C, 1>(plan, f); });
  });
}

KernelRegistrar<UnaryFn> reg_unary(unary_stub, kCUDA, &unary_kernel);

}  // namespace
}  // namespace ember::cuda
