#pragma once

// Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p), as
// PyTorch's native_dropout: one kernel writes the output and the mask, one the gradient.

#include <tuple>

#include "ember/core/dispatch.h"
#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// Returns x itself when !training or p == 0, zeros when p == 1. The mask is a Bernoulli draw
// from `gen` (default: the device's default generator).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// (out, mask) with mask a bool tensor of x's shape, true where the element was kept (all true
// when !training), as PyTorch's native_dropout; the backward is native_dropout_backward. The
// mask is ops::DropoutMaskDraw's (16 random bits an element), the same on every device, and
// takes one generator offset, as bernoulli_ would.
std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training = true,
                                          Generator* gen = nullptr);

// grad_output * mask * scale (0 where mask is false, even for inf or NaN gradients); mask is a
// bool tensor of grad_output's shape, scale is 1 / (1 - p). Its own backward is itself.
Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale);

// dropout(gelu(x), p, training, gen) (GELU's exact form, as TransformerEncoderLayer's "gelu")
// in one pass each way: the same mask from the same generator offset, GELU computed in float
// (double for float64) and rounded once. The backward reads x and the mask, kept as packed bits
// (an eighth of a bool mask; drawing it again cost the backward most of its time on the GPU).
Tensor gelu_dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

// native_dropout's keep mask for x and `rng` (the draw its kernels make), unrecorded: for the
// backwards that draw their mask again instead of keeping it.
Tensor dropout_keep_mask(const Tensor& x, double p, PhiloxState rng);

// The kernels see a dense floating x, and fresh out (x's dtype) and mask (bool; undefined: not
// written) with x's strides: all are walked as flat memory. bits (uint8, (n + 7) / 8 elements;
// undefined: not written) gets the mask packed: bit j of byte i is element 8 i + j, the bits past n
// zero. With `gelu` the kept values are gelu(x) * scale.
using NativeDropoutFn = void (*)(const Tensor& out, const Tensor& mask, const Tensor& bits, const Tensor& x,
                                 double p, PhiloxState rng, bool gelu);
using NativeDropoutBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_output,
                                         const Tensor& mask, double scale);
// grad_input = keep ? gelu'(x) * grad_output * scale : 0 with keep read from the forward's packed
// bits; all three dense with x's strides, walked as flat memory. sums, unless undefined (then the
// three are contiguous), gets grad_input summed over every dim but the last as stored, in the
// compute dtype: the bias gradient of the linear before it.
using GeluDropoutBackwardFn = void (*)(const Tensor& grad_input, const Tensor& sums,
                                       const Tensor& grad_output, const Tensor& x, const Tensor& bits,
                                       double p);
extern DispatchStub<NativeDropoutFn> native_dropout_stub;
extern DispatchStub<NativeDropoutBackwardFn> native_dropout_backward_stub;
extern DispatchStub<GeluDropoutBackwardFn> gelu_dropout_backward_stub;

}  // namespace ember
