#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/sample_random.h"

// Per-sample image transforms (torchvision.transforms.v2), run by data::TransformDataset in the
// DataLoader's workers:
//   Compose({RandomCrop(32, 4), RandomHorizontalFlip(), Normalize({0.4914, 0.4822, 0.4465},
//                                                                 {0.2470, 0.2435, 0.2616})})
// An image is a CPU tensor [C, H, W]. Random transforms draw from the sample's SampleRandom, never
// from a global generator, so the result depends on (seed, epoch, sample index) alone. None
// writes to its input; one that would not change the image returns it as is.
namespace ember::data::transforms {

using Transform = std::function<Tensor(const Tensor& image, SampleRandom& random)>;

// The transforms applied in order; empty, the identity.
class Compose {
 public:
  Compose() = default;
  explicit Compose(std::vector<Transform> transforms);
  Tensor operator()(const Tensor& image, SampleRandom& random) const;
  const std::vector<Transform>& transforms() const { return transforms_; }

 private:
  std::vector<Transform> transforms_;
};

// A size x size window at a uniformly random offset of the image with `padding` zeros on every
// side, any dtype; pad and crop are one copy. Draws the window's top, then its left.
class RandomCrop {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0);
  Tensor operator()(const Tensor& image, SampleRandom& random) const;

 private:
  int64_t size_, padding_;
};

// Mirrors the width dim with probability p, any dtype. Draws one number.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& image, SampleRandom& random) const;

 private:
  double p_;
};

// Scales the shorter side to `size`, the longer to int(size * long / short) as torchvision, with
// the bilinear weights of torchvision's antialias=True (plain bilinear, align_corners=False, when
// growing). uint8 or float32; uint8 results are rounded to nearest even, where torchvision's uint8
// fast path (integer weights, rounded between passes) can differ by 1.
class Resize {
 public:
  explicit Resize(int64_t size);
  Tensor operator()(const Tensor& image, SampleRandom&) const;

 private:
  int64_t size_;
};

// The size x size window at the center, zero-padded where the image is smaller, any dtype, at
// torchvision's offset: round half to even of (H - size) / 2 (padding floor(d / 2) before).
class CenterCrop {
 public:
  explicit CenterCrop(int64_t size);
  Tensor operator()(const Tensor& image, SampleRandom&) const;

 private:
  int64_t size_;
};

// uint8 -> float32, scaled to [0, 1] when `scale` as v2.ToDtype(torch.float32, scale=True) (its
// multiply by 1 / 255, to the bit); float32 images pass unchanged. float32 is the only target.
class ToDtype {
 public:
  explicit ToDtype(ScalarType dtype, bool scale = false);
  Tensor operator()(const Tensor& image, SampleRandom&) const;

 private:
  bool scale_;
};

// (x - mean[c]) / std[c] per channel, in float32 as torchvision's. It also takes uint8 images,
// read as ToDtype(kFloat32, true) would make them, in the same pass and to the same bits, so
// Compose({RandomCrop(28, 4), Normalize({0.1307}, {0.3081})}) converts and normalizes at once.
class Normalize {
 public:
  Normalize(const std::vector<double>& mean, const std::vector<double>& std);
  Tensor operator()(const Tensor& image, SampleRandom&) const;

 private:
  std::vector<float> mean_, std_;  // in float32, as torchvision converts them
};

}  // namespace ember::data::transforms
