#pragma once

// 2D pooling with PyTorch's names, argument order and defaults, on [N, C, H, W] or unbatched
// [C, H, W] inputs, and 3D pooling built on it. Size arguments take one value for every dim or
// one per dim; an empty stride means stride = kernel_size. As in PyTorch, a 4D input that
// suggests channels-last (suggest_memory_format) is pooled as NHWC without a copy, and its
// results (output, indices, gradient) are channels-last; other inputs are pooled as contiguous
// NCHW.

#include <optional>
#include <tuple>

#include "ember/core/dispatch.h"
#include "ember/core/macros.h"
#include "ember/core/tensor.h"

namespace ember {

// NaN wins a window, as in PyTorch. ceil_mode rounds the output size up, keeping only windows
// that start inside the input or its left/top padding.
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
// (values, indices): int64 indices of each maximum, flat (h * W + w) within its input plane. A
// window that dilation makes miss the input entirely gives -inf (the lowest integer) and -1.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1, bool ceil_mode = false);
// divisor_override replaces the window size as the divisor; count_include_pad counts the
// zero padding (not the part of a ceil_mode window past it) in the window size.
Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Output cell i of n over an input of size s averages [floor(i*s/n), ceil((i+1)*s/n)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size);

// 3D pooling on [N, C, D, H, W] or unbatched [C, D, H, W] inputs, with the 2D ops' arguments (one
// value for all three dims or one per dim), as two 2D passes: each depth plane's H x W, then the
// depth. Exact: a window is a product of one range per dim.
Tensor max_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
Tensor avg_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool3d(const Tensor& input, IntArrayRef output_size);

namespace detail {
// PyTorch's pooling_output_shape: the output size along one dim.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode);
}  // namespace detail

// The windows [begin, end) of `out` along one dim whose span, from o * stride - padding over
// (kernel - 1) * dilation + 1 inputs, holds input i: where a max pool's backward looks.
struct WindowRange {
  int64_t begin, end;
};
EMBER_HOST_DEVICE inline WindowRange windows_containing(int64_t i, int64_t kernel, int64_t stride,
                                                        int64_t padding, int64_t dilation, int64_t out) {
  const int64_t span = (kernel - 1) * dilation + 1, end = (i + padding) / stride + 1;
  return {i + padding < span ? 0 : (i + padding - span) / stride + 1, end < out ? end : out};
}

// A max pool's indices: int64, as max_pool2d_with_indices returns them, or int32, as max_pool2d
// keeps them for its backward (half the memory). Undefined tensors give null data.
struct PoolIndices {
  void* data;
  bool wide;

  static PoolIndices of(const Tensor& t) {
    return {t.defined() ? t.data_ptr() : nullptr, !t.defined() || t.dtype() == ScalarType::Int64};
  }
  EMBER_HOST_DEVICE int64_t get(int64_t i) const {
    return wide ? static_cast<const int64_t*>(data)[i] : static_cast<const int32_t*>(data)[i];
  }
  EMBER_HOST_DEVICE void set(int64_t i, int64_t v) const {
    if (wide)
      static_cast<int64_t*>(data)[i] = v;
    else
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
  }
};

struct Pool2dParams {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  bool count_include_pad;
  int64_t divisor;             // avg_pool2d's divisor_override, 0 when none
  MemoryFormat memory_format;  // of input, out and indices: Contiguous or ChannelsLast
};
// out [N, C, Ho, Wo] and input [N, C, H, W], both dense in the memory format given (a
// channels-last input, as PyTorch, is read as NHWC and gives NHWC results); indices (int64 or
// int32, like out) may be undefined when not wanted. The adaptive kernel reads only out's shape.
using MaxPool2dFn = void (*)(const Tensor& out, const Tensor& indices, const Tensor& input,
                             const Pool2dParams& p);
// max_pool2d's gradient: grad_input [N, C, H, W] (dense in p.memory_format, as grad_output and
// indices) gets at each element the sum of grad_output over the windows whose maximum it is
// (indices as max_pool2d's), added in window order: deterministic, no atomics.
using MaxPool2dBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_output,
                                     const Tensor& indices, const Pool2dParams& p);
using AvgPool2dFn = void (*)(const Tensor& out, const Tensor& input, const Pool2dParams& p);
using AdaptiveAvgPool2dFn = void (*)(const Tensor& out, const Tensor& input, MemoryFormat memory_format);
extern DispatchStub<MaxPool2dFn> max_pool2d_stub;
extern DispatchStub<MaxPool2dBackwardFn> max_pool2d_backward_stub;
extern DispatchStub<AvgPool2dFn> avg_pool2d_stub;
extern DispatchStub<AdaptiveAvgPool2dFn> adaptive_avg_pool2d_stub;

}  // namespace ember
