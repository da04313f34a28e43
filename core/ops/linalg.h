#pragma once

// Matrix products, with PyTorch's names, rank rules and defaults. The Tensor methods matmul, mm
// and bmm call these.

#include <string_view>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// PyTorch's matmul: 1D x 1D is a dot product (0-dim result), a 1D operand is treated as a row
// (left) or column (right) vector and that dim is dropped from the result, and leading batch
// dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& mat1, const Tensor& mat2);       // [M, K] @ [K, N]
Tensor bmm(const Tensor& batch1, const Tensor& batch2);  // [B, M, K] @ [B, K, N], no broadcasting
// beta * input + alpha * (mat1 @ mat2); input broadcasts to [M, N]. beta == 0 ignores input
// (NaN included), as in PyTorch.
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// beta * input + alpha * (batch1 @ batch2); input broadcasts to [B, M, N].
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor outer(const Tensor& a, const Tensor& b);  // [n] x [m] -> [n, m], promoting as `*` does
Tensor dot(const Tensor& a, const Tensor& b);    // [n] . [n] -> 0-dim
// Einstein summation over labels a-z, A-Z and "..." (broadcast dims), as torch.einsum: "ij,jk->ik";
// without "->" the output is the ellipsis dims, then the labels seen once in ASCII order. A label
// repeated within one operand takes its diagonal; size-1 dims broadcast. Operands share a dtype.
Tensor einsum(std::string_view equation, ArrayRef<Tensor> operands);

// out[i] = beta * out[i] + alpha * a[i] @ b[i] for out [B, M, N] (contiguous), a [B, M, K] and
// b [B, K, N] (any strides, batch stride 0 for broadcasting), all of one dtype; beta == 0 does
// not read out. f16/bf16 accumulate in float32 and round once.
using BmmFn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                       const Scalar& beta);
extern DispatchStub<BmmFn> bmm_stub;

// Optional fused addmm for a bias row (nn.Linear's forward): out [M, N] (rows maybe padded) =
// a [M, K] @ b [K, N] + bias [N], bias contiguous, all of one floating dtype. Devices without a
// kernel (the CPU) run addmm as a product and an add; CUDA adds the bias in cuBLASLt's epilogue.
using AddmmBiasFn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);
extern DispatchStub<AddmmBiasFn> addmm_bias_stub;

// out [M, N] = a [M, K] @ b [K, N] and sums [M] = a summed over K (unless undefined), a and b of one
// floating dtype, out and sums contiguous, of a's dtype or (for float16/bfloat16 a) float32: a linear's
// weight gradient (a = the output's gradient transposed) with its bias gradient, which CUDA takes from the
// product's epilogue (cuBLASLt's BGRADB) instead of reading the gradient again.
using MmRowSumsFn = void (*)(const Tensor& out, const Tensor& sums, const Tensor& a, const Tensor& b);
extern DispatchStub<MmRowSumsFn> mm_row_sums_stub;

namespace detail {
// bias [N] + a [..., K] @ b [K, N] (a contiguous beyond 2 dims) computed on casts of bias and b to
// a's dtype (bias_cast, b_cast) and differentiable in bias and b themselves: under autocast, a linear's
// float32 parameters get float32 gradients straight from the product (cuBLASLt writes them), not through
// casts back. For devices with addmm_bias_stub; the caller checks the shapes.
Tensor addmm_bias_of_casts(const Tensor& bias, const Tensor& a, const Tensor& b, const Tensor& bias_cast,
                           const Tensor& b_cast);
}  // namespace detail

}  // namespace ember
