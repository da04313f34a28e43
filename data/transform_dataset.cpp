#include "ember/data/transform_dataset.h"

#include "ember/core/error.h"

namespace ember::data {

TransformDataset::TransformDataset(std::shared_ptr<const Dataset> dataset, transforms::Transform transform,
                                   uint64_t seed)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), seed_(seed) {
  EMBER_CHECK(dataset_, "TransformDataset: the dataset is null");
  EMBER_CHECK(transform_ != nullptr, "TransformDataset: the transform is empty");
}

TransformDataset::TransformDataset(const TransformDataset& other)
    : dataset_(other.dataset_), transform_(other.transform_), seed_(other.seed_), epoch_(other.epoch()) {}

Example TransformDataset::get(int64_t index) const {
  index = detail::wrap_index("TransformDataset", index, size());
  Example sample = dataset_->get(index);
  EMBER_CHECK(!sample.empty(), "TransformDataset: sample ", index, " has no fields");
  transforms::SampleRandom random(seed_, epoch(), index);
  sample[0] = transform_(sample[0], random);
  return sample;
}

void TransformDataset::set_epoch(int64_t epoch) const {
  epoch_.store(epoch, std::memory_order_relaxed);
  dataset_->set_epoch(epoch);
}

}  // namespace ember::data
