#pragma once

// Convolutions with PyTorch's names, argument order and defaults. Inputs are [N, C, (D, H,) W] or
// unbatched [C, (D, H,) W]; weights [C_out, C_in / groups, (kD, kH,) kW] (transposed: [C_in,
// C_out / groups, kH, kW]); bias [C_out] or undefined. Size arguments take one value for every
// spatial dim or one per dim.

#include <string_view>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// PyTorch's string padding, "same" (stride 1 only; an odd total is padded more at the end) or
// "valid" (none). A type of its own so that a literal `0` still means zero padding.
struct PaddingMode {
  template <size_t N>
  PaddingMode(const char (&s)[N]) : name(s) {}
  explicit PaddingMode(std::string_view s) : name(s) {}
  std::string_view name;
};

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation = 1, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation = 1, int64_t groups = 1);
// Input [N, C, D, H, W] or unbatched [C, D, H, W]; weight [C_out, C_in / groups, kD, kH, kW]. Runs
// as one 2D convolution (cuDNN's on the GPU) over N x D_out images, each holding the kD input
// planes its output depth sees as channels: the input is copied kD times.
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef dilation = 1,
              int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation = 1, int64_t groups = 1);
// The adjoint of conv2d: output size (H - 1) * stride - 2 * padding + dilation * (kH - 1) +
// output_padding + 1 per spatial dim.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0,
                        IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);

// The 2D kernels' parameters; padding is the rows and columns added before the input (those
// after follow from the output's size).
struct Conv2dParams {
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
};
// out [N, C_out, Ho, Wo], input [N, C_in, H, W], weight as above, all of one floating dtype and
// all contiguous or all channels-last (NHWC-contiguous; the weight [C_out, kH, kW, C_in / groups]
// in memory); bias [C_out] contiguous, or undefined.
using Conv2dFn = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight,
                          const Tensor& bias, const Conv2dParams& p);
extern DispatchStub<Conv2dFn> conv2d_stub;
extern DispatchStub<Conv2dFn> conv_transpose2d_stub;
// conv2d's weight gradient: grad_weight [C_out, C_in / groups, kH, kW] from input [N, C_in, H, W]
// and grad_output [N, C_out, Ho, Wo], of one floating dtype, all contiguous or all
// channels-last.
using Conv2dWeightFn = void (*)(const Tensor& grad_weight, const Tensor& input,
                                const Tensor& grad_output, const Conv2dParams& p);
extern DispatchStub<Conv2dWeightFn> conv2d_weight_stub;

}  // namespace ember
