#pragma once

#include <string>

#include "ember/data/vision_dataset.h"

namespace ember::data {

// CIFAR-10's binary version: root/data_batch_{1..5}.bin (train) or root/test_batch.bin, records of
// one label byte and 3072 pixel bytes (CHW). images() is [N, 3, 32, 32] uint8, targets() [N] int64
// in [0, 10).
class CIFAR10 : public VisionDataset {
 public:
  explicit CIFAR10(const std::string& root, bool train = true);
};

// CIFAR-100's binary version: root/train.bin or root/test.bin, records of two label bytes (coarse,
// fine) and 3072 pixel bytes. targets() are the fine labels, in [0, 100).
class CIFAR100 : public VisionDataset {
 public:
  explicit CIFAR100(const std::string& root, bool train = true);
};

}  // namespace ember::data
