#pragma once

#include <cstdint>
#include <vector>

#include "ember/core/tensor.h"

// The loops behind data/transforms.h, on contiguous CPU images [C, H, W] that the transform has
// already checked; each returns a new contiguous image and never writes to its input.
namespace ember::data::transforms::detail {

// `image` made contiguous, after checking that it is a CPU image [C, H, W]; `op` starts the errors.
Tensor checked_image(const char* op, const Tensor& image);

// image[:, top : top + height, left : left + width] for any dtype, zero where the window leaves the
// image (top and left may be negative): a zero padding and a crop in one copy, as F.crop.
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width);

// The width dim mirrored, for any dtype.
Tensor hflip(const Tensor& image);

// uint8 -> float32, times float32(1 / 255) when `scale`.
Tensor to_float(const Tensor& image, bool scale);

// (x - mean[c]) / std[c] in float32, for a float32 image or a uint8 one scaled as to_float does:
// the same operations, so the same bits, as to_float(image, true) followed by this.
Tensor normalize(const Tensor& image, const std::vector<float>& mean, const std::vector<float>& std);

// Bilinear resize of a uint8 or float32 image, antialiased when shrinking (transforms_resize.cpp).
Tensor resize(const Tensor& image, int64_t height, int64_t width);

}  // namespace ember::data::transforms::detail
