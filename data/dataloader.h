#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/collate.h"
#include "ember/data/dataset.h"
#include "ember/data/iterable_dataset.h"
#include "ember/data/sampler.h"

namespace ember::data {

using CollateFn = std::function<Example(std::vector<Example>)>;
using WorkerInitFn = std::function<void(int64_t worker_id)>;

// What a worker thread knows of itself (torch.utils.data.get_worker_info()).
struct WorkerInfo {
  int64_t id;           // in [0, num_workers)
  int64_t num_workers;  // of the loader
};
// In a DataLoader's worker thread (its worker_init_fn, Dataset::get, collate_fn) that worker's
// info; elsewhere, and when the loop's thread builds the batches (num_workers 0), none.
std::optional<WorkerInfo> get_worker_info();

// DataLoaderOptions().batch_size(64).shuffle(true).num_workers(2): setters chain, getters of
// the same name read (as libtorch's).
class DataLoaderOptions {
 public:
  DataLoaderOptions& batch_size(int64_t v) { return set(batch_size_, v); }
  DataLoaderOptions& shuffle(bool v) { return set(shuffle_, v); }
  DataLoaderOptions& drop_last(bool v) { return set(drop_last_, v); }
  // Background threads that build batches; 0 builds each batch in the loop's thread when asked.
  DataLoaderOptions& num_workers(int64_t v) { return set(num_workers_, v); }
  // Batches built ahead per worker: at most num_workers * prefetch_factor wait for the loop.
  DataLoaderOptions& prefetch_factor(int64_t v) { return set(prefetch_factor_, v); }
  DataLoaderOptions& pin_memory(bool v) { return set(pin_memory_, v); }
  DataLoaderOptions& seed(uint64_t v) { return set(seed_, v); }  // the shuffle's seed
  DataLoaderOptions& collate_fn(CollateFn v) { return set(collate_fn_, std::move(v)); }
  // Called in each worker thread as it starts, before it builds a batch, with its id. Workers
  // start anew each epoch (PyTorch's default, persistent_workers=False), and so does this call;
  // with num_workers 0 it is not called. An exception from it ends the epoch's loop with an
  // ember::Error naming the worker.
  DataLoaderOptions& worker_init_fn(WorkerInitFn v) { return set(worker_init_fn_, std::move(v)); }
  // Keeps the worker threads from one epoch to the next (they start at the first epoch, and
  // worker_init_fn runs once in each); needs num_workers > 0. A new epoch started while one is in
  // progress ends that one, as PyTorch's new iterator does.
  DataLoaderOptions& persistent_workers(bool v) { return set(persistent_workers_, v); }

  int64_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  int64_t num_workers() const { return num_workers_; }
  int64_t prefetch_factor() const { return prefetch_factor_; }
  bool pin_memory() const { return pin_memory_; }
  uint64_t seed() const { return seed_; }
  const CollateFn& collate_fn() const { return collate_fn_; }
  const WorkerInitFn& worker_init_fn() const { return worker_init_fn_; }
  bool persistent_workers() const { return persistent_workers_; }

 private:
  template <class T, class V>
  DataLoaderOptions& set(T& field, V&& value) {
    field = std::forward<V>(value);
    return *this;
  }

  int64_t batch_size_ = 1;
  bool shuffle_ = false;
  bool drop_last_ = false;
  int64_t num_workers_ = 0;
  int64_t prefetch_factor_ = 2;
  bool pin_memory_ = false;
  uint64_t seed_ = 0;
  CollateFn collate_fn_ = default_collate;
  WorkerInitFn worker_init_fn_;
  bool persistent_workers_ = false;
};

namespace detail {
class EpochRun;
class WorkerPool;
}  // namespace detail

// Batches of a dataset (torch.utils.data.DataLoader), map-style or iterable:
//   for (auto& batch : loader) { Tensor x = batch[0], y = batch[1]; ... }
// Each range-for is one epoch. The order of samples is fixed by the seed and the epoch alone, so
// it does not depend on num_workers; the epoch advances by one per loop, or set_epoch() sets it
// (for resuming), and begin() hands it to the sampler and to Dataset::set_epoch (augmentation).
// Workers build batches ahead and hand them over in order; an exception in a worker is rethrown in
// the loop as ember::Error naming the batch and dataset index. Leaving the loop early, or
// destroying the loader, stops and joins the workers (each finishes the batch it is building
// first).
//
// An IterableDataset's batches are batch_size samples of its stream, in stream order (there is no
// sampler, shuffle or size()); with workers, each worker batches its own stream and the loop takes
// a batch from each in turn, as in PyTorch.
class DataLoader {
 public:
  class Iterator;

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  // With a custom sampler (then shuffle must be false, as in PyTorch).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<Sampler> sampler);
  DataLoader(std::shared_ptr<const IterableDataset> dataset, DataLoaderOptions options = {});
  template <class D>
  requires std::derived_from<D, Dataset> || std::derived_from<D, IterableDataset>
  explicit DataLoader(D dataset, DataLoaderOptions options = {})
      : DataLoader(std::make_shared<const D>(std::move(dataset)), std::move(options)) {}
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  DataLoader(DataLoader&&) = default;
  DataLoader& operator=(DataLoader&&) = default;

  Iterator begin();  // starts an epoch (and fetches its first batch)
  Iterator end();
  int64_t size() const;  // batches per epoch (an IterableDataset's are not known)
  // The epoch the next begin() runs and the batch it starts at (resuming mid-epoch: the batches
  // before it are not built; later epochs start at their first).
  void set_epoch(int64_t epoch, int64_t start_batch = 0);
  int64_t epoch() const { return epoch_; }  // the epoch the next begin() runs
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const;  // a map-style loader's

 private:
  void stop_runs(const std::string& why);  // ends the epochs in progress: their loops fail with why

  std::shared_ptr<const Dataset> dataset_;           // map-style
  std::shared_ptr<const IterableDataset> iterable_;  // or iterable
  DataLoaderOptions options_;
  std::optional<BatchSampler> batch_sampler_;  // map-style
  int64_t epoch_ = 0, start_batch_ = 0;
  std::vector<std::weak_ptr<detail::EpochRun>> runs_;  // stopped when the loader goes
  std::shared_ptr<detail::WorkerPool> pool_;           // persistent_workers, from the first epoch
};

// An input iterator over one epoch's batches; copies share the epoch.
class DataLoader::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Example;
  using difference_type = std::ptrdiff_t;
  using pointer = Example*;
  using reference = Example&;

  Iterator() = default;
  Example& operator*() const;
  Example* operator->() const { return &**this; }
  Iterator& operator++();
  bool operator==(const Iterator& o) const;

 private:
  friend class DataLoader;
  explicit Iterator(std::shared_ptr<detail::EpochRun> run) : run_(std::move(run)) {}
  bool at_end() const;

  std::shared_ptr<detail::EpochRun> run_;
};

}  // namespace ember::data
