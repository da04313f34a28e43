#pragma once

#include <string>

#include "ember/core/tensor.h"
#include "ember/data/vision_dataset.h"

namespace ember::data {

// A file in the IDX format of MNIST-like data sets, gzip-compressed or plain: a big-endian header
// (magic number 0x0000TTDD for data type TT and DD dims, then DD uint32 sizes) and the data in C
// order. Reads the unsigned-byte type 0x08 into a uint8 tensor of the declared sizes.
Tensor read_idx(const std::string& path);

// MNIST (and Fashion-MNIST, KMNIST: the same files): root/{train,t10k}-images-idx3-ubyte and
// root/{train,t10k}-labels-idx1-ubyte, each read from its .gz when present. images() is
// [N, 1, H, W] uint8 (28 x 28 in MNIST), targets() [N] int64 in [0, 10).
class MNIST : public VisionDataset {
 public:
  explicit MNIST(const std::string& root, bool train = true);
};

}  // namespace ember::data
