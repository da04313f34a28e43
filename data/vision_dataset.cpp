#include "ember/data/vision_dataset.h"

namespace ember::data {

VisionDataset::VisionDataset(std::string name, Tensor images, Tensor targets, int64_t num_classes)
    : name_(std::move(name)),
      images_(std::move(images)),
      targets_(std::move(targets)),
      num_classes_(num_classes) {
  EMBER_CHECK(images_.dim() == 4 && images_.dtype() == kUInt8, name_,
              ": images must be uint8 [N, C, H, W], got ", images_.dtype(), " ", images_.sizes());
  EMBER_CHECK(targets_.dim() == 1 && targets_.dtype() == kInt64 && targets_.size(0) == images_.size(0), name_,
              ": targets must be int64 [", images_.size(0), "], got ", targets_.dtype(), " ",
              targets_.sizes());
  EMBER_CHECK(num_classes_ >= 1, name_, ": num_classes must be positive, got ", num_classes_);
}

Example VisionDataset::get(int64_t index) const {
  index = detail::wrap_index(name_.c_str(), index, size());
  return {images_.select(0, index), targets_.select(0, index)};
}

}  // namespace ember::data
