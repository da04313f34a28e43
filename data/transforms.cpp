#include "ember/data/transforms.h"

#include <algorithm>

#include "ember/core/error.h"
#include "ember/data/transforms_kernels.h"

namespace ember::data::transforms {

namespace {

// The offset of a centered window of `size` along a dim of `n`, as torchvision's center_crop: a
// larger window has floor(d / 2) of its padding before the image; a smaller one starts at
// round((n - size) / 2), Python's round (half to even).
int64_t center_offset(int64_t n, int64_t size) {
  if (size > n) return -((size - n) / 2);
  const int64_t d = n - size, q = d / 2;
  return d % 2 == 1 && q % 2 == 1 ? q + 1 : q;
}

void check_uint8_or_float32(const char* op, const Tensor& image) {
  EMBER_CHECK(image.dtype() == kUInt8 || image.dtype() == kFloat32, op,
              ": expected a uint8 or float32 image, got ", image.dtype());
}

}  // namespace

Compose::Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {
  for (size_t i = 0; i < transforms_.size(); ++i)
    EMBER_CHECK(transforms_[i] != nullptr, "Compose: transform ", i, " is empty");
}

Tensor Compose::operator()(const Tensor& image, SampleRandom& random) const {
  Tensor out = image;
  for (const Transform& t : transforms_) out = t(out, random);
  return out;
}

RandomCrop::RandomCrop(int64_t size, int64_t padding) : size_(size), padding_(padding) {
  EMBER_CHECK(size >= 1, "RandomCrop: size must be positive, got ", size);
  EMBER_CHECK(padding >= 0, "RandomCrop: padding must be non-negative, got ", padding);
}

Tensor RandomCrop::operator()(const Tensor& image, SampleRandom& random) const {
  Tensor src = detail::checked_image("RandomCrop", image);
  const int64_t h = src.size(1) + 2 * padding_, w = src.size(2) + 2 * padding_;
  EMBER_CHECK(size_ <= h && size_ <= w, "RandomCrop: crop size ", size_, " is larger than the padded image [",
              h, ", ", w, "] (image ", src.sizes(), " with padding ", padding_, ")");
  const int64_t top = random.randint(h - size_ + 1);
  const int64_t left = random.randint(w - size_ + 1);
  return detail::crop(src, top - padding_, left - padding_, size_, size_);
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& image, SampleRandom& random) const {
  Tensor src = detail::checked_image("RandomHorizontalFlip", image);
  return random.uniform() < p_ ? detail::hflip(src) : src;
}

Resize::Resize(int64_t size) : size_(size) {
  EMBER_CHECK(size >= 1, "Resize: size must be positive, got ", size);
}

Tensor Resize::operator()(const Tensor& image, SampleRandom&) const {
  Tensor src = detail::checked_image("Resize", image);
  check_uint8_or_float32("Resize", src);
  const int64_t h = src.size(1), w = src.size(2);
  EMBER_CHECK(h >= 1 && w >= 1, "Resize: the image ", src.sizes(), " is empty");
  // In double, then truncated, as torchvision's int(size * long / short).
  const auto long_side =
      static_cast<int64_t>(static_cast<double>(size_ * std::max(h, w)) / static_cast<double>(std::min(h, w)));
  return w <= h ? detail::resize(src, long_side, size_) : detail::resize(src, size_, long_side);
}

CenterCrop::CenterCrop(int64_t size) : size_(size) {
  EMBER_CHECK(size >= 1, "CenterCrop: size must be positive, got ", size);
}

Tensor CenterCrop::operator()(const Tensor& image, SampleRandom&) const {
  Tensor src = detail::checked_image("CenterCrop", image);
  return detail::crop(src, center_offset(src.size(1), size_), center_offset(src.size(2), size_), size_,
                      size_);
}

ToDtype::ToDtype(ScalarType dtype, bool scale) : scale_(scale) {
  EMBER_CHECK(dtype == kFloat32, "ToDtype: float32 is the only target dtype, got ", dtype);
}

Tensor ToDtype::operator()(const Tensor& image, SampleRandom&) const {
  Tensor src = detail::checked_image("ToDtype", image);
  check_uint8_or_float32("ToDtype", src);
  return src.dtype() == kUInt8 ? detail::to_float(src, scale_) : src;
}

Normalize::Normalize(const std::vector<double>& mean, const std::vector<double>& std)
    : mean_(mean.begin(), mean.end()), std_(std.begin(), std.end()) {
  EMBER_CHECK(!mean.empty() && mean.size() == std.size(),
              "Normalize: mean and std need one value per channel, got ", mean.size(), " and ", std.size());
  for (size_t c = 0; c < std_.size(); ++c)
    EMBER_CHECK(std_[c] != 0.0f, "Normalize: std[", c, "] is ", std[c],
                ", which is 0 in float32 (division by zero)");
}

Tensor Normalize::operator()(const Tensor& image, SampleRandom&) const {
  Tensor src = detail::checked_image("Normalize", image);
  check_uint8_or_float32("Normalize", src);
  EMBER_CHECK(src.size(0) == static_cast<int64_t>(mean_.size()), "Normalize: mean and std have ",
              mean_.size(), " values, but the image ", src.sizes(), " has ", src.size(0), " channels");
  return detail::normalize(src, mean_, std_);
}

}  // namespace ember::data::transforms
