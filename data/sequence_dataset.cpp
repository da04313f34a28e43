#include "ember/data/sequence_dataset.h"

#include "ember/core/factories.h"

namespace ember::data {

SequenceDataset::SequenceDataset(std::vector<std::vector<int64_t>> sequences, std::vector<int64_t> labels)
    : sequences_(std::move(sequences)), labels_(std::move(labels)) {
  EMBER_CHECK(sequences_.size() == labels_.size(), "SequenceDataset: ", sequences_.size(), " sequences but ",
              labels_.size(), " labels");
}

Example SequenceDataset::get(int64_t index) const {
  const int64_t i = detail::wrap_index("SequenceDataset", index, size());
  const std::vector<int64_t>& s = sequences_[static_cast<size_t>(i)];
  return {tensor(s, kInt64), full({}, labels_[static_cast<size_t>(i)], TensorOptions(kInt64))};
}

std::vector<int64_t> SequenceDataset::lengths() const {
  std::vector<int64_t> out;
  out.reserve(sequences_.size());
  for (const auto& s : sequences_) out.push_back(static_cast<int64_t>(s.size()));
  return out;
}

}  // namespace ember::data
