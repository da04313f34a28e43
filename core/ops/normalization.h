#pragma once

// layer_norm, batch_norm and group_norm, with PyTorch's arguments and defaults. The native_*
// variants also return the statistics the backward needs.

#include <array>
#include <tuple>
#include <vector>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// Normalizes over the trailing dims `normalized_shape`; weight and bias (optional, undefined
// Tensor for none) have that shape.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// (out, mean, rstd): mean and rstd have x's leading dims followed by 1s for the normalized dims,
// in float32 (float64 for a float64 x).
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, IntArrayRef normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps);

// x is (N, C, *). Training normalizes with the batch's mean and biased variance and, when the
// running stats are defined, updates them in place: r = (1 - momentum) * r + momentum * s, with
// the unbiased variance for running_var. Eval uses the running stats (the batch's when they are
// undefined, as in PyTorch).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
// (out, mean, invstd): the per-channel statistics used, float32 (float64 for a float64 x).
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& running_mean,
                                                     const Tensor& running_var, const Tensor& weight,
                                                     const Tensor& bias, bool training, double momentum,
                                                     double eps);

// relu(batch_norm(x, ...) + residual), residual (x's sizes, dtype and device; undefined for none)
// added in the compute dtype, in one pass over x: the ResNet blocks' batch norm, ReLU and
// residual join. The backward keeps the output for ReLU's mask, not a second activation.
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                       double momentum = 0.1, double eps = 1e-5, const Tensor& residual = {});

// x is (N, C, *); C must be divisible by num_groups. weight and bias are (C).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// (out, mean, rstd) with mean and rstd of shape (N, num_groups).
std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& x, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias, double eps);

namespace nn_detail {

// What layer_norm's autograd node does, for ops that end in a layer norm (dropout_add_layer_norm).
// The dtype the kernels take the weight and bias in: their own when the ones given share x's dtype
// or the compute dtype `cd` (a bf16 model's parameters need no cast kernels), else `cd`.
ScalarType layer_norm_param_dtype(const Tensor& weight, const Tensor& bias, ScalarType x, ScalarType cd);
// The gradients of (x, weight, bias), each only when `want` says so, x and gy [M, N] in any
// layout, mean and rstd M values, w undefined or N values. First order, one fused kernel, nothing
// recorded; w is read and dw and db come in dtype `pd`.
std::vector<Tensor> layer_norm_backward_fused(const Tensor& gy, const Tensor& x, const Tensor& mean,
                                              const Tensor& rstd, const Tensor& w, int64_t M, int64_t N,
                                              IntArrayRef wsizes, ScalarType pd, std::array<bool, 3> want);
// The same as recorded ops in the compute dtype `cd` (create_graph), the statistics recomputed
// from x where x has history.
std::vector<Tensor> layer_norm_backward_graph(const Tensor& gy, const Tensor& x, const Tensor& mean,
                                              const Tensor& rstd, const Tensor& w, int64_t M, int64_t N,
                                              IntArrayRef wsizes, ScalarType cd, double eps,
                                              std::array<bool, 3> want);

}  // namespace nn_detail

// Kernel families. x and out are contiguous and share a floating dtype; statistics, weight,
// bias, scale and shift are contiguous in the compute dtype (float64 for float64, else float32)
// unless said otherwise.
// layer_norm: x is [M, N]; mean and rstd are [M]; weight and bias [N] or undefined, both in x's
// dtype or both in the compute dtype.
using LayerNormFn = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                             const Tensor& weight, const Tensor& bias, double eps);
// layer_norm's backward over x [M, N] (M, N > 0): with xhat = (x - mean) * rstd and gxhat = gy * w
// (gy without weight), dx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) along each
// row, dw = sum over rows of gy * xhat and db = sum of gy. gy and dx are contiguous in x's dtype;
// mean and rstd [M] in the compute dtype; weight [N] and dw and db [N] all in x's dtype or all in
// the compute dtype. An undefined dx, dw or db is not computed (at least one is defined).
using LayerNormBackwardFn = void (*)(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& gy,
                                     const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight);
// Per-row mean and 1/sqrt(biased var + eps) of x [R, K].
using RowMomentsFn = void (*)(const Tensor& mean, const Tensor& rstd, const Tensor& x, double eps);
// out = x * scale[c] + shift[c] for x [A, C, B] (group_norm, with A = 1 and N * C channels).
using ChannelAffineFn = void (*)(const Tensor& out, const Tensor& x, const Tensor& scale,
                                 const Tensor& shift);
// batch_norm's kernels. x (and out, dy, dx, of x's dtype) is a contiguous [A, C, B]; a
// channels-last input comes as [N * H * W, C, 1]. mean, invstd and the sums are [C] in the
// compute dtype; weight, bias, their gradients and the running stats are [C] (or undefined for
// none) in any floating dtype, read and written in that dtype.
// Training statistics over A and B: mean and invstd = 1 / sqrt(biased var + eps); the running
// stats, when defined, updated in place: r = (1 - momentum) * r + momentum * s, with the unbiased
// variance for running_var. With x undefined (eval), mean and invstd of the running stats.
using BatchNormStatsFn = void (*)(const Tensor& mean, const Tensor& invstd, const Tensor& running_mean,
                                  const Tensor& running_var, const Tensor& x, double momentum, double eps);
// out = (x - mean) * invstd * weight + bias, plus residual (of x's dtype; undefined for none),
// then max(out, 0) when `relu` (NaN stays NaN).
using BatchNormElemtFn = void (*)(const Tensor& out, const Tensor& x, const Tensor& mean,
                                  const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                                  const Tensor& residual, bool relu);
// With `relu`, the backward of batch_norm_relu without a residual: dy counts only where the
// forward's output was positive, a mask recomputed from x (the forward's arithmetic, in its
// order) instead of a pass over the saved output. relu_zero_bound(x's dtype) is where that
// output, rounded to x's dtype, stops being zero.
inline double relu_zero_bound(ScalarType dt) {
  switch (dt) {
    case ScalarType::Float16:
      return 0x1p-25;  // half of float16's smallest subnormal: a tie rounds to even, 0
    case ScalarType::BFloat16:
      return 0x1p-134;
    default:
      return 0;
  }
}
// Per channel sum_dy = sum(dy) and sum_dy_xmu = sum(dy * (x - mean)) over A and B, and, when
// defined, dw = sum_dy_xmu * invstd and db = sum_dy.
using BatchNormBackwardReduceFn = void (*)(const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& dw,
                                           const Tensor& db, const Tensor& dy, const Tensor& x,
                                           const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                           const Tensor& bias, bool relu);
// dx = (dy - sum_dy * k - (x - mean) * invstd^2 * sum_dy_xmu * k) * invstd * weight with
// k = inv_count: the gradient through batch statistics. With sum_dy undefined (statistics that
// are constants, as in eval) dx = dy * invstd * weight.
using BatchNormBackwardElemtFn = void (*)(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                          const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                          const Tensor& bias, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                                          double inv_count, bool relu);
extern DispatchStub<LayerNormFn> layer_norm_stub;
extern DispatchStub<LayerNormBackwardFn> layer_norm_backward_stub;
extern DispatchStub<RowMomentsFn> row_moments_stub;
extern DispatchStub<ChannelAffineFn> channel_affine_stub;
extern DispatchStub<BatchNormStatsFn> batch_norm_stats_stub;
extern DispatchStub<BatchNormElemtFn> batch_norm_elemt_stub;
extern DispatchStub<BatchNormBackwardReduceFn> batch_norm_backward_reduce_stub;
extern DispatchStub<BatchNormBackwardElemtFn> batch_norm_backward_elemt_stub;

}  // namespace ember
