#include <algorithm>
#include <cmath>
#include <vector>

#include "ember/core/error.h"
#include "ember/core/factories.h"
#include "ember/data/transforms_kernels.h"

namespace ember::data::transforms::detail {

namespace {

// Output index i along one axis reads inputs [start[i], start[i] + count[i]) with weights
// w[i * stride + k]: PyTorch's _upsample_bilinear2d_aa index ranges (and PIL's). The triangle
// filter is widened by the scale when shrinking, so every input pixel counts (antialiasing);
// growing, it is plain bilinear with align_corners=False.
struct AxisWeights {
  std::vector<int64_t> start, count;
  std::vector<float> w;
  int64_t stride;
};

AxisWeights axis_weights(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1 ? scale : 1.0;
  const double invscale = scale >= 1 ? 1.0 / scale : 1.0;
  AxisWeights a;
  a.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.start.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  a.w.assign(static_cast<size_t>(out * a.stride), 0.0f);
  std::vector<double> wd(static_cast<size_t>(a.stride));
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    // Truncation, not floor, as PyTorch.
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - lo;
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double x = (static_cast<double>(lo + k) - center + 0.5) * invscale;
      wd[static_cast<size_t>(k)] = std::max(0.0, 1.0 - std::abs(x));
      total += wd[static_cast<size_t>(k)];
    }
    for (int64_t k = 0; k < n; ++k)
      a.w[static_cast<size_t>(i * a.stride + k)] = static_cast<float>(wd[static_cast<size_t>(k)] / total);
    a.start[static_cast<size_t>(i)] = lo;
    a.count[static_cast<size_t>(i)] = n;
  }
  return a;
}

// One channel: columns (in rows [h, w] -> tmp [h, ow]), then rows (tmp -> out [oh, ow]).
template <class T>
void resize_channel(const T* in, T* out, int64_t h, int64_t w, int64_t oh, int64_t ow, const AxisWeights& ax,
                    const AxisWeights& ay, float* tmp, float* acc) {
  for (int64_t y = 0; y < h; ++y) {
    const T* row = in + y * w;
    for (int64_t x = 0; x < ow; ++x) {
      const T* src = row + ax.start[static_cast<size_t>(x)];
      const float* wx = ax.w.data() + x * ax.stride;
      float s = 0;
      for (int64_t k = 0; k < ax.count[static_cast<size_t>(x)]; ++k) s += wx[k] * static_cast<float>(src[k]);
      tmp[y * ow + x] = s;
    }
  }
  for (int64_t y = 0; y < oh; ++y) {
    std::fill(acc, acc + ow, 0.0f);
    const float* wy = ay.w.data() + y * ay.stride;
    for (int64_t k = 0; k < ay.count[static_cast<size_t>(y)]; ++k) {
      const float* src = tmp + (ay.start[static_cast<size_t>(y)] + k) * ow;
      for (int64_t x = 0; x < ow; ++x) acc[x] += wy[k] * src[x];
    }
    T* o = out + y * ow;
    for (int64_t x = 0; x < ow; ++x) {
      if constexpr (std::is_same_v<T, uint8_t>)
        o[x] = static_cast<uint8_t>(std::nearbyint(std::clamp(acc[x], 0.0f, 255.0f)));
      else
        o[x] = acc[x];
    }
  }
}

template <class T>
void resize_image(const Tensor& image, Tensor& out) {
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  const int64_t oh = out.size(1), ow = out.size(2);
  const AxisWeights ax = axis_weights(w, ow), ay = axis_weights(h, oh);
  std::vector<float> tmp(static_cast<size_t>(h * ow)), acc(static_cast<size_t>(ow));
  const T* in = image.data_ptr<T>();
  T* o = out.data_ptr<T>();
  for (int64_t ch = 0; ch < c; ++ch)
    resize_channel(in + ch * h * w, o + ch * oh * ow, h, w, oh, ow, ax, ay, tmp.data(), acc.data());
}

}  // namespace

Tensor resize(const Tensor& image, int64_t height, int64_t width) {
  if (height == image.size(1) && width == image.size(2)) return image;
  Tensor out = empty({image.size(0), height, width}, image.dtype());
  if (image.dtype() == kUInt8)
    resize_image<uint8_t>(image, out);
  else
    resize_image<float>(image, out);
  return out;
}

}  // namespace ember::data::transforms::detail
