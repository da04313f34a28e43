#pragma once

// The post-LN transformer's residual join, layer_norm(residual + dropout(x)) over the last dim, as
// one op each way (flash-attn's dropout_add_layer_norm). The sum never reaches memory and the
// output comes in x's dtype, the sublayer's compute dtype: under autocast the next matmul reads
// it as it is, with no cast kernel, where layer_norm would give float32. The backward reads the
// mask from bits the forward writes (an eighth of a byte per element): drawing it again would cost
// more than the row's loads.

#include "ember/core/dispatch.h"
#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// x and residual have one shape (residual in x's dtype, or float32 for a float16 or bfloat16 x;
// other dtypes are cast to x's); weight and bias (optional) have the last dim's size. The dropout
// mask is native_dropout's of x.contiguous() for the same generator offset, drawn only when
// training and p > 0.
// Sums and statistics are computed in float32 (float64 for float64). Rows longer than 8192 run as
// the composite.
Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                              const Tensor& bias, double p, double eps = 1e-5, bool training = true,
                              Generator* gen = nullptr);

// Kernels over rows of N: x and out [M, N] contiguous in x's dtype T; residual [M, N] contiguous in
// T or float32; weight and bias [N] (or undefined) in T or the compute dtype; mean and rstd [M]
// in the compute dtype. The keep mask is native_dropout's draw from `rng` at flat index
// row * N + col when `dropout` is set (every element kept, scale 1, otherwise); bits, when defined,
// gets it as uint8 [M, ceil(N / 8)], bit j of byte (row, c) for column 8 c + j (0 past the row).
using DropoutAddLayerNormFn = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                       const Tensor& bits, const Tensor& x, const Tensor& residual,
                                       const Tensor& weight, const Tensor& bias, bool dropout, double p,
                                       PhiloxState rng, double eps);
// The backward: with s = residual + keep * x * scale, xhat = (s - mean) * rstd and
// ds = layer_norm's dx of gy, writes dresidual = ds (residual's dtype), dx = keep * ds * scale
// (x's dtype), dw = sum of gy * xhat and db = sum of gy over rows (weight's dtype), and dx_sums
// = the sum of dx (as stored) over rows, in the parameters' dtype: the bias gradient of the linear before
// it (BackwardExtras; only with dx), each unless undefined. gy is [M, N] contiguous in T; keep is
// read from the forward's bits (all kept when undefined).
using DropoutAddLayerNormBackwardFn = void (*)(const Tensor& dx, const Tensor& dresidual, const Tensor& dw,
                                               const Tensor& db, const Tensor& dx_sums, const Tensor& gy,
                                               const Tensor& x, const Tensor& residual, const Tensor& mean,
                                               const Tensor& rstd, const Tensor& weight, const Tensor& bits,
                                               double p);
extern DispatchStub<DropoutAddLayerNormFn> dropout_add_layer_norm_stub;
extern DispatchStub<DropoutAddLayerNormBackwardFn> dropout_add_layer_norm_backward_stub;

}  // namespace ember
