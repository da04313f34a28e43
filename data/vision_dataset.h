#pragma once

#include <string>

#include "ember/data/dataset.h"

namespace ember::data {

// Labelled images held in memory, the common part of MNIST, CIFAR10 and CIFAR100 (torchvision's
// VisionDataset). Sample i is (image uint8 [C, H, W], a view of images(); label int64 scalar).
class VisionDataset : public Dataset {
 public:
  // images [N, C, H, W] uint8, targets [N] int64 in [0, num_classes); `name` starts the errors.
  VisionDataset(std::string name, Tensor images, Tensor targets, int64_t num_classes);

  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;  // negative indices count from the end
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }
  int64_t num_classes() const { return num_classes_; }

 private:
  std::string name_;
  Tensor images_;
  Tensor targets_;
  int64_t num_classes_;
};

}  // namespace ember::data
