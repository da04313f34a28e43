// CUDA kernels of the binary elementwise ops and where: the shared functors
// (core/ops/elementwise_functors.h) through the generic launcher (GELU's backward of 2-byte floats
// with its own functor).
#include "ember/core/ops/elementwise.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/gelu_reduced_precision.cuh"

namespace ember::cuda {
namespace {

// A float32 sum of a float32 and a 16-bit float operand, in either order: the residual add of
// mixed precision (the float32 stream plus a bf16 branch), vectorized with each operand in its
// own storage type rather than converted element by element in the strided kernel.
bool mixed_add(const ElementwisePlan& plan, const ops::Add<float>& f) {
  return try_vectorized_as<float, float, float, BFloat16>(plan, f) ||
         try_vectorized_as<float, float, BFloat16, float>(plan, f) ||
         try_vectorized_as<float, float, float, Half>(plan, f) ||
         try_vectorized_as<float, float, Half, float>(plan, f);
}

void binary_kernel(ops::BinaryOp op, ScalarType compute, const Tensor& out, const Tensor& a, const Tensor& b,
                   const ops::ElementwiseParams& p) {
  ElementwisePlan plan({out, a, b});
  if (op == ops::BinaryOp::GeluBackward && (out.dtype() == kBFloat16 || out.dtype() == kFloat16))
    return gpu_kernel<float, 2>(plan, GeluBackwardReducedPrecision{});
  if (op == ops::BinaryOp::Add && compute == kFloat32 && out.dtype() == kFloat32 && a.dtype() != b.dtype() &&
      plan.numel() > 0 && mixed_add(plan, ops::Add<float>{static_cast<float>(p.a)}))
    return;
  visit_compute_type(compute, [&](auto tag) {
    using C = decltype(tag);
    ops::visit_binary<C>(op, p, [&](auto f) { gpu_kernel<C, 2>(plan, f); });
  });
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  ElementwisePlan plan({out, cond, a, b});
  visit_compute_type(out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    gpu_kernel<C, 3, BoolThenStorage>(plan, ops::Where<C>{});
  });
}

KernelRegistrar<BinaryFn> reg_binary(binary_stub, kCUDA, &binary_kernel);
KernelRegistrar<WhereFn> reg_where(where_stub, kCUDA, &where_kernel);

}  // namespace
}  // namespace ember::cuda
