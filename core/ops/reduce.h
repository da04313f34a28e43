#pragma once

// Reductions with PyTorch's names, defaults and dtype rules. A dim list reduces those dims;
// an empty list reduces all of them. keepdim keeps the reduced dims with size 1. The Tensor
// methods of the same names (x.sum({1}), x.max(0)) call these.

#include <tuple>

#include "ember/core/dispatch.h"
#include "ember/core/ops/reduce_functors.h"
#include "ember/core/tensor.h"

namespace ember {

// sum and prod of bool or integer tensors give int64 unless `dtype` names another dtype, which
// is then the dtype of the accumulation and of the result.
Tensor sum(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false,
           std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
// Floating inputs only, unless `dtype` (floating) says what to compute in.
Tensor mean(const Tensor& x, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);

// max/min propagate NaN; along a dim they return (values, int64 indices) and the first of
// equal extremes wins. Reducing an empty dim is an error (no identity).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
// Without a dim: the index into the flattened tensor (keepdim then keeps every dim as 1).
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Sum of squared deviations / max(0, N - correction); floating inputs only.
Tensor var(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
// The vector p-norm (torch.linalg.vector_norm): p = 2, 1, inf (max |x|), -inf (min |x|),
// 0 (count of nonzeros) or any other p as (sum |x|^p)^(1/p). Floating inputs only.
Tensor norm(const Tensor& x, const Scalar& p = 2, IntArrayRef dims = {}, bool keepdim = false);
// log(sum(exp(x))) without overflow; integer inputs give float32.
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);

// bool results (uint8 for uint8 inputs, as PyTorch); NaN counts as true.
Tensor all(const Tensor& x);
Tensor any(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);

// The kernel family. `out` (and `indices`, int64 with out's strides, only for Max and Min) have
// in's rank with the dims in `dim_mask` of size 1; an index is the row-major position over the
// reduced dims. The reduced sub-space may be empty only for ops with an identity.
using ReduceFn = void (*)(ops::ReduceOp op, const Tensor& out, const Tensor& indices,
                          const Tensor& in, uint64_t dim_mask, const ops::ReduceParams& p);
extern DispatchStub<ReduceFn> reduce_stub;

}  // namespace ember
