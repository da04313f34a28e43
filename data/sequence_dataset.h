#pragma once

#include <cstdint>
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data {

// Labelled sequences of different lengths, as a tokenized text corpus: sample i is (int64
// sequence [L_i], int64 label scalar). Batch them with pad_collate (collate.h) and, to pad
// little, a LengthGroupedSampler over lengths().
class SequenceDataset : public Dataset {
 public:
  SequenceDataset(std::vector<std::vector<int64_t>> sequences, std::vector<int64_t> labels);

  int64_t size() const override { return static_cast<int64_t>(sequences_.size()); }
  Example get(int64_t index) const override;  // negative indices count from the end
  std::vector<int64_t> lengths() const;
  const std::vector<int64_t>& labels() const { return labels_; }

 private:
  std::vector<std::vector<int64_t>> sequences_;
  std::vector<int64_t> labels_;
};

}  // namespace ember::data
