#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ember/data/dataset.h"
#include "ember/data/transforms.h"

namespace ember::data {

// Sample i of `dataset` with `transform` applied to its field 0, the image; the other fields (the
// label) pass through. Random transforms draw from SampleRandom(seed, epoch, i), so an epoch's
// augmented samples do not depend on num_workers or on thread timing, and a run resumed at epoch e
// sees exactly what the first run saw.
class TransformDataset : public Dataset {
 public:
  TransformDataset(std::shared_ptr<const Dataset> dataset, transforms::Transform transform,
                   uint64_t seed = 0);
  // Copyable, unlike the atomic, so that DataLoader(TransformDataset(...)) works.
  TransformDataset(const TransformDataset& other);

  int64_t size() const override { return dataset_->size(); }
  Example get(int64_t index) const override;  // negative indices count from the end
  // The DataLoader calls it at the start of each epoch (or set it yourself when iterating without
  // one). Workers read it, so it must not change while an epoch's loader is running.
  void set_epoch(int64_t epoch) const override;
  int64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  transforms::Transform transform_;
  uint64_t seed_;
  mutable std::atomic<int64_t> epoch_{0};
};

}  // namespace ember::data
