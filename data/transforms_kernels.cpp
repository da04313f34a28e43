#include "ember/data/transforms_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "ember/core/error.h"
#include "ember/core/factories.h"

namespace ember::data::transforms::detail {

Tensor checked_image(const char* op, const Tensor& image) {
  EMBER_CHECK(image.defined(), op, ": the image is undefined");
  EMBER_CHECK(image.dim() == 3, op, ": expected an image [C, H, W], got shape ", image.sizes());
  EMBER_CHECK(image.is_cpu(), op, ": transforms run on the CPU, got an image on ", image.device());
  return image.contiguous();
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  if (top == 0 && left == 0 && height == h && width == w) return image;
  Tensor out = empty({c, height, width}, image.dtype());
  const auto es = static_cast<int64_t>(image.element_size());
  const auto* in = static_cast<const std::byte*>(image.data_ptr());
  auto* o = static_cast<std::byte*>(out.data_ptr());
  // Columns [x0, x1) of every output row come from the image, the others are padding.
  const int64_t x0 = std::clamp<int64_t>(-left, 0, width), x1 = std::clamp<int64_t>(w - left, x0, width);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t y = 0; y < height; ++y, o += width * es) {
      const int64_t sy = top + y;
      if (sy < 0 || sy >= h || x0 == x1) {
        std::memset(o, 0, static_cast<size_t>(width * es));
        continue;
      }
      std::memset(o, 0, static_cast<size_t>(x0 * es));
      std::memcpy(o + x0 * es, in + ((ch * h + sy) * w + left + x0) * es,
                  static_cast<size_t>((x1 - x0) * es));
      std::memset(o + x1 * es, 0, static_cast<size_t>((width - x1) * es));
    }
  }
  return out;
}

namespace {

// torchvision scales by image.to(float32).mul_(1.0 / 255): a float32 multiply by 1/255 rounded to
// float32 (not a division, whose bits differ for some pixels).
constexpr float kInv255 = static_cast<float>(1.0 / 255.0);

// Flipping moves whole elements, so only their size matters.
template <class T>
void hflip_rows(const T* in, T* out, int64_t rows, int64_t w) {
  for (int64_t r = 0; r < rows; ++r, in += w, out += w)
    for (int64_t x = 0; x < w; ++x) out[x] = in[w - 1 - x];
}

template <class In>
void normalize_channels(const In* in, float* out, int64_t hw, const std::vector<float>& mean,
                        const std::vector<float>& std) {
  for (size_t ch = 0; ch < mean.size(); ++ch, in += hw, out += hw) {
    const float m = mean[ch], s = std[ch];
    for (int64_t i = 0; i < hw; ++i) {
      float x = static_cast<float>(in[i]);
      if constexpr (std::is_same_v<In, uint8_t>) x *= kInv255;
      out[i] = (x - m) / s;
    }
  }
}

}  // namespace

Tensor hflip(const Tensor& image) {
  Tensor out = empty(image.sizes(), image.dtype());
  const int64_t rows = image.size(0) * image.size(1), w = image.size(2);
  switch (image.element_size()) {
    case 1:
      hflip_rows(static_cast<const uint8_t*>(image.data_ptr()), static_cast<uint8_t*>(out.data_ptr()), rows,
                 w);
      break;
    case 2:
      hflip_rows(static_cast<const uint16_t*>(image.data_ptr()), static_cast<uint16_t*>(out.data_ptr()), rows,
                 w);
      break;
    case 4:
      hflip_rows(static_cast<const uint32_t*>(image.data_ptr()), static_cast<uint32_t*>(out.data_ptr()), rows,
                 w);
      break;
    default:
      hflip_rows(static_cast<const uint64_t*>(image.data_ptr()), static_cast<uint64_t*>(out.data_ptr()), rows,
                 w);
  }
  return out;
}

Tensor to_float(const Tensor& image, bool scale) {
  Tensor out = empty(image.sizes(), kFloat32);
  const uint8_t* in = image.data_ptr<uint8_t>();
  float* o = out.data_ptr<float>();
  const int64_t n = image.numel();
  if (scale)
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(in[i]) * kInv255;
  else
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(in[i]);
  return out;
}

Tensor normalize(const Tensor& image, const std::vector<float>& mean, const std::vector<float>& std) {
  Tensor out = empty(image.sizes(), kFloat32);
  const int64_t hw = image.size(1) * image.size(2);
  if (image.dtype() == kUInt8)
    normalize_channels(image.data_ptr<uint8_t>(), out.data_ptr<float>(), hw, mean, std);
  else
    normalize_channels(image.data_ptr<float>(), out.data_ptr<float>(), hw, mean, std);
  return out;
}

}  // namespace ember::data::transforms::detail
