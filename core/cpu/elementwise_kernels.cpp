#include "ember/core/cpu/elementwise_loop.h"
#include "ember/core/ops/elementwise.h"

namespace ember::cpu {
namespace {

void unary_kernel(ops::UnaryOp op, const Tensor& out, const Tensor& in, const ops::ElementwiseParams& p) {
  ElementwiseIter it({out, in});
  visit_compute_type(out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    if constexpr (!std::is_same_v<C, bool>)  // bool only reaches sign, a copy
      ops::visit_unary<C>(op, p, [&](auto f) { cpu_kernel<C, C, 1>(it, f); });
    else
      cpu_kernel<bool, bool, 1>(it, [](bool x) { return x; });
  });
}

void binary_kernel(ops::BinaryOp op, ScalarType compute, const Tensor& out, const Tensor& a, const Tensor& b,
                   const ops::ElementwiseParams& p) {
  ElementwiseIter it({out, a, b});
  visit_compute_type(compute, [&](auto tag) {
    using C = decltype(tag);
    ops::visit_binary<C>(op, p, [&](auto f) {
      using R = decltype(f(C{}, C{}));
      cpu_kernel<R, C, 2>(it, f);
    });
  });
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  ElementwiseIter it({out, cond, a, b});
  visit_compute_type(out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    cpu_kernel<C, C, 3>(it, ops::Where<C>{});
  });
}

KernelRegistrar<UnaryFn> reg_unary(unary_stub, kCPU, &unary_kernel);
KernelRegistrar<BinaryFn> reg_binary(binary_stub, kCPU, &binary_kernel);
KernelRegistrar<WhereFn> reg_where(where_stub, kCPU, &where_kernel);

}  // namespace
}  // namespace ember::cpu
