#include "ember/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "ember/core/generator.h"
#include "ember/core/random.h"

namespace ember::data {

int64_t detail::wrap_index(const char* what, int64_t index, int64_t size) {
  EMBER_CHECK(index >= -size && index < size, what, ": index ", index,
              " is out of range for a dataset of size ", size);
  return index < 0 ? index + size : index;
}

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  EMBER_CHECK(!tensors_.empty(), "TensorDataset: needs at least one tensor");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    EMBER_CHECK(t.defined(), "TensorDataset: tensor ", i, " is undefined");
    EMBER_CHECK(t.dim() >= 1, "TensorDataset: tensor ", i,
                " is 0-dim; each tensor needs a first dim to index");
    EMBER_CHECK(t.size(0) == tensors_[0].size(0),
                "TensorDataset: size mismatch between tensors: tensor 0 is ", tensors_[0].sizes(),
                " but tensor ", i, " is ", t.sizes(), " (the first dims must be equal)");
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  index = detail::wrap_index("TensorDataset", index, size_);
  Example e;
  e.reserve(tensors_.size());
  for (const Tensor& t : tensors_) e.push_back(t.select(0, index));
  return e;
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  EMBER_CHECK(dataset_, "Subset: the dataset is null");
  const int64_t n = dataset_->size();
  for (size_t i = 0; i < indices_.size(); ++i)
    EMBER_CHECK(indices_[i] >= 0 && indices_[i] < n, "Subset: indices[", i, "] = ", indices_[i],
                " is out of range for a dataset of size ", n);
}

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<const Dataset>> datasets)
    : datasets_(std::move(datasets)), cumulative_sizes_{0} {
  EMBER_CHECK(!datasets_.empty(), "ConcatDataset: no datasets given");
  for (size_t i = 0; i < datasets_.size(); ++i) {
    EMBER_CHECK(datasets_[i], "ConcatDataset: datasets[", i, "] is null");
    cumulative_sizes_.push_back(cumulative_sizes_.back() + datasets_[i]->size());
  }
}

Example ConcatDataset::get(int64_t index) const {
  index = detail::wrap_index("ConcatDataset", index, size());
  // The first dataset whose running total passes index.
  const auto d = std::upper_bound(cumulative_sizes_.begin() + 1, cumulative_sizes_.end(), index) -
                 (cumulative_sizes_.begin() + 1);
  return datasets_[static_cast<size_t>(d)]->get(index - cumulative_sizes_[static_cast<size_t>(d)]);
}

void ConcatDataset::set_epoch(int64_t epoch) const {
  for (const auto& d : datasets_) d->set_epoch(epoch);
}

Example Subset::get(int64_t index) const {
  index = detail::wrap_index("Subset", index, size());
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

std::vector<Subset> random_split(std::shared_ptr<const Dataset> dataset, const std::vector<int64_t>& lengths,
                                 uint64_t seed) {
  EMBER_CHECK(dataset, "random_split: the dataset is null");
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    EMBER_CHECK(lengths[i] >= 0, "random_split: lengths[", i, "] = ", lengths[i], " is negative");
    total += lengths[i];
  }
  EMBER_CHECK(total == dataset->size(), "random_split: the lengths add up to ", total,
              ", but the dataset has size ", dataset->size());
  Generator gen(seed);
  Tensor perm = randperm(total, kInt64, &gen);
  const int64_t* p = perm.data_ptr<int64_t>();
  std::vector<Subset> out;
  int64_t start = 0;
  for (int64_t len : lengths) {
    out.emplace_back(dataset, std::vector<int64_t>(p + start, p + start + len));
    start += len;
  }
  return out;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> stratified_split(const std::vector<int64_t>& labels,
                                                                       double test_fraction, uint64_t seed) {
  EMBER_CHECK(test_fraction >= 0 && test_fraction <= 1,
              "stratified_split: test_fraction must be in [0, 1], got ", test_fraction);
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(static_cast<int64_t>(i));
  std::vector<int64_t> train, test;
  for (const auto& [label, members] : by_class) {
    // Philox stream `label` under key `seed`: each class's shuffle is its own.
    Generator gen(seed);
    gen.set_state({seed, static_cast<uint64_t>(label)});
    Tensor perm = randperm(static_cast<int64_t>(members.size()), kInt64, &gen);
    const int64_t* p = perm.data_ptr<int64_t>();
    const auto n_test =
        static_cast<size_t>(std::llround(test_fraction * static_cast<double>(members.size())));
    for (size_t k = 0; k < members.size(); ++k) (k < n_test ? test : train).push_back(members[p[k]]);
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  return {train, test};
}

}  // namespace ember::data
