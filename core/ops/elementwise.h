#pragma once

// Elementwise ops with broadcasting and PyTorch's type promotion. The Tensor methods of the
// same names (x.exp(), x.add_(y)) call these.

#include "ember/core/dispatch.h"
#include "ember/core/ops/elementwise_functors.h"
#include "ember/core/tensor.h"

namespace ember {

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Scalar& b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
// Rounding to whole numbers in the input's dtype (integers unchanged); round takes halves to even,
// as torch.round. Their gradient is zero.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erf(const Tensor& x);
// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// grad_output times the derivative of gelu(self, approximate), as torch.ops.aten.gelu_backward;
// one fused kernel for the erf form.
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate = "none");
// grad_output where self > threshold, else 0, as torch.ops.aten.threshold_backward: relu's backward
// (self its output, threshold 0) in one pass, in the operands' layout.
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);

// where(cond, a, b): a where cond is true, else b; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

// Kernel families: one CPU and one CUDA kernel each, selected by op. `compute` is the dtype
// the math runs in (inputs are read as it, the result is stored into out's dtype).
using UnaryFn = void (*)(ops::UnaryOp op, const Tensor& out, const Tensor& in,
                         const ops::ElementwiseParams& p);
using BinaryFn = void (*)(ops::BinaryOp op, ScalarType compute, const Tensor& out, const Tensor& a,
                          const Tensor& b, const ops::ElementwiseParams& p);
using WhereFn = void (*)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
extern DispatchStub<UnaryFn> unary_stub;
extern DispatchStub<BinaryFn> binary_stub;
extern DispatchStub<WhereFn> where_stub;

}  // namespace ember
