#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::data {

// One sample, or one batch: a tuple of tensors, as (input, target) in Python.
using Example = std::vector<Tensor>;

// A map-style dataset (torch.utils.data.Dataset): get(i) for i in [0, size()). DataLoader
// workers call get() from several threads at once, so it must not modify shared state.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // Datasets whose samples change between epochs (random augmentation) use it; the DataLoader
  // calls it before each epoch, with no get() running. const, as loaders share datasets as const:
  // such a dataset keeps its epoch in an atomic, and a wrapper passes the call on.
  virtual void set_epoch(int64_t epoch) const { (void)epoch; }
};

// Tensors that share their first dim: sample i is (t0[i], t1[i], ...), views of the tensors.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);
  template <class... Ts>
  requires(std::is_convertible_v<Ts, Tensor>&&...) explicit TensorDataset(Tensor first, Ts... rest)
      : TensorDataset(std::vector<Tensor>{first, rest...}) {}

  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;  // negative indices count from the end
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

// The samples of `dataset` at `indices`, in that order (torch.utils.data.Subset).
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  void set_epoch(int64_t epoch) const override { dataset_->set_epoch(epoch); }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// Several datasets one after another (torch.utils.data.ConcatDataset): sample i is the first
// dataset's while i is below its size, then the next one's, and so on.
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<std::shared_ptr<const Dataset>> datasets);

  int64_t size() const override { return cumulative_sizes_.back(); }
  Example get(int64_t index) const override;  // negative indices count from the end
  void set_epoch(int64_t epoch) const override;
  const std::vector<std::shared_ptr<const Dataset>>& datasets() const { return datasets_; }
  // The running totals of the sizes (PyTorch's cumulative_sizes), starting at 0.
  const std::vector<int64_t>& cumulative_sizes() const { return cumulative_sizes_; }

 private:
  std::vector<std::shared_ptr<const Dataset>> datasets_;
  std::vector<int64_t> cumulative_sizes_;
};

namespace detail {
// Python's rule for an index into a dataset of `size`: -size <= index < size, negative counting
// from the end; `what` starts the error.
int64_t wrap_index(const char* what, int64_t index, int64_t size);
}  // namespace detail

// Splits `dataset` into non-overlapping subsets of the given lengths (which must add up to its
// size) along a random permutation drawn from `seed`, as torch.utils.data.random_split.
std::vector<Subset> random_split(std::shared_ptr<const Dataset> dataset, const std::vector<int64_t>& lengths,
                                 uint64_t seed = 0);

// Indices of a train/test split that keeps each class's share (scikit-learn's train_test_split
// with stratify=labels): each class's samples are shuffled by (seed, class) and round(test_fraction
// * count) of them go to the test side. Both lists are sorted.
std::pair<std::vector<int64_t>, std::vector<int64_t>> stratified_split(const std::vector<int64_t>& labels,
                                                                       double test_fraction,
                                                                       uint64_t seed = 0);

}  // namespace ember::data
