#include "ember/data/dataloader.h"

#include "ember/data/epoch_run.h"

#include "ember/cuda/device.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace ember::data {

namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

void check_options(const DataLoaderOptions& o) {
  EMBER_CHECK(o.batch_size() >= 1, "DataLoader: batch_size must be positive, got ", o.batch_size());
  EMBER_CHECK(o.num_workers() >= 0, "DataLoader: num_workers must be non-negative, got ", o.num_workers());
  EMBER_CHECK(o.prefetch_factor() >= 1, "DataLoader: prefetch_factor must be positive, got ",
              o.prefetch_factor());
  EMBER_CHECK(o.collate_fn() != nullptr, "DataLoader: collate_fn is empty");
  EMBER_CHECK(!o.persistent_workers() || o.num_workers() > 0,
              "DataLoader: persistent_workers needs num_workers > 0");
  EMBER_CHECK(
      !o.pin_memory() || cuda::is_available(),
      "DataLoader: pin_memory requires CUDA, and there is no CUDA device (or ember was built without it)");
}

// Checks the options; a null sampler means the one they ask for.
std::shared_ptr<Sampler> checked_sampler(const std::shared_ptr<const Dataset>& dataset,
                                         const DataLoaderOptions& o, std::shared_ptr<Sampler> sampler) {
  EMBER_CHECK(dataset, "DataLoader: the dataset is null");
  check_options(o);
  if (!sampler) {
    if (o.shuffle()) return std::make_shared<RandomSampler>(dataset->size(), o.seed());
    return std::make_shared<SequentialSampler>(dataset->size());
  }
  EMBER_CHECK(!o.shuffle(),
              "DataLoader: a sampler and shuffle=true cannot be combined (the sampler sets the order)");
  return sampler;
}

}  // namespace

namespace detail {

namespace {

// One epoch of a map-style dataset: its batches' index lists, and the workers that build them.
// Workers claim batches in order, at most `max_ahead_` past the one the loop waits for, and file
// each result by its batch number, so the loop receives them in order however the workers
// interleave.
class MapEpochRun final : public EpochRun {
 public:
  MapEpochRun(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches,
              const DataLoaderOptions& o, const std::shared_ptr<WorkerPool>& pool)
      : dataset_(std::move(dataset)),
        batches_(std::move(batches)),
        collate_(o.collate_fn()),
        pin_memory_(o.pin_memory()),
        max_ahead_(o.num_workers() == 0
                       ? 0
                       : std::min(o.prefetch_factor(), kMaxInt / o.num_workers()) * o.num_workers()) {
    start_workers(o.num_workers(), o.worker_init_fn(), pool,
                  [this](int64_t w, const std::string& init_error) { work(w, init_error); });
  }
  ~MapEpochRun() override { stop(); }

  bool advance() override {
    current_.clear();
    if (next_ == size()) {
      finish();
      return false;
    }
    const int64_t b = next_++;
    Result r;
    std::unique_lock<std::mutex> lock(mutex_);
    if (workers() > 0)
      // Every worker's init done before a batch is handed over: an init error always ends the loop.
      built_.wait(lock, [&] {
        return (ready_.count(b) > 0 && started_ == workers()) || stopped_ || !init_error_.empty();
      });
    if (!init_error_.empty()) {
      const std::string error = init_error_;
      lock.unlock();
      fail(error);
    }
    if (stopped_) {
      lock.unlock();
      fail_interrupted();
    }
    if (workers() == 0) {
      lock.unlock();
      r = build(b, "");
    } else {
      auto it = ready_.find(b);
      r = std::move(it->second);
      ready_.erase(it);
      delivered_ = b + 1;
      lock.unlock();
      taken_.notify_all();
    }
    if (!r.error.empty()) fail(r.error);
    current_ = std::move(r.batch);
    return true;
  }

 private:
  struct Result {
    Example batch;
    std::string error;  // set instead of batch when building failed
  };

  int64_t size() const { return static_cast<int64_t>(batches_.size()); }

  Result build(int64_t b, const std::string& who) const {
    const std::vector<int64_t>& indices = batches_[static_cast<size_t>(b)];
    std::vector<Example> samples;
    samples.reserve(indices.size());
    const std::string head = "DataLoader: " + who + "batch " + std::to_string(b);
    for (int64_t i : indices) {
      try {
        samples.push_back(dataset_->get(i));
      } catch (...) {
        return {{}, head + ", dataset index " + std::to_string(i) + ": " + current_exception_message()};
      }
    }
    Result r;
    try {
      r.batch = collate_batch(std::move(samples), collate_, pin_memory_);
    } catch (...) {
      r.error = head + " (collate): " + current_exception_message();
    }
    return r;
  }

  void work(int64_t w, const std::string& init_error) {
    const std::string who = "worker " + std::to_string(w) + ", ";
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++started_;
      if (init_error_.empty()) init_error_ = init_error;
    }
    built_.notify_all();
    if (!init_error.empty()) return;
    for (;;) {
      int64_t b;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        taken_.wait(lock,
                    [&] { return stopped_ || claimed_ == size() || claimed_ - delivered_ < max_ahead_; });
        if (stopped_ || claimed_ == size()) return;
        b = claimed_++;
      }
      Result r = build(b, who);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(b, std::move(r));
      }
      built_.notify_all();
    }
  }

  const std::shared_ptr<const Dataset> dataset_;
  const std::vector<std::vector<int64_t>> batches_;
  const CollateFn collate_;
  const bool pin_memory_;
  const int64_t max_ahead_;

  int64_t next_ = 0;  // the next batch to take (the loop's thread only)

  // Guarded by mutex_:
  int64_t claimed_ = 0;    // batches claimed by workers
  int64_t delivered_ = 0;  // batches handed to the loop
  std::map<int64_t, Result> ready_;
  int64_t started_ = 0;     // workers past their worker_init_fn
  std::string init_error_;  // the first worker_init_fn that threw
};

}  // namespace
}  // namespace detail

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : DataLoader(std::move(dataset), std::move(options), nullptr) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      batch_sampler_(std::in_place, checked_sampler(dataset_, options_, std::move(sampler)),
                     options_.batch_size(), options_.drop_last()) {}

DataLoader::DataLoader(std::shared_ptr<const IterableDataset> dataset, DataLoaderOptions options)
    : iterable_(std::move(dataset)), options_(std::move(options)) {
  EMBER_CHECK(iterable_, "DataLoader: the dataset is null");
  check_options(options_);
  EMBER_CHECK(!options_.shuffle(),
              "DataLoader: an IterableDataset cannot be shuffled (its stream sets the order)");
}

DataLoader::~DataLoader() { stop_runs("the loader was destroyed during the epoch"); }

int64_t DataLoader::size() const {
  EMBER_CHECK(batch_sampler_,
              "DataLoader: an IterableDataset has no length: its batches are counted as they come");
  return batch_sampler_->size();
}

const Dataset& DataLoader::dataset() const {
  EMBER_CHECK(dataset_, "DataLoader::dataset: this loader reads an IterableDataset");
  return *dataset_;
}

void DataLoader::stop_runs(const std::string& why) {
  for (std::weak_ptr<detail::EpochRun>& r : runs_)
    if (std::shared_ptr<detail::EpochRun> run = r.lock()) run->interrupt(why);
  runs_.clear();
}

void DataLoader::set_epoch(int64_t epoch, int64_t start_batch) {
  EMBER_CHECK(!iterable_ || start_batch == 0,
              "DataLoader::set_epoch: an IterableDataset's epoch starts at batch 0, got ", start_batch);
  EMBER_CHECK(iterable_ || (start_batch >= 0 && start_batch <= size()), "DataLoader::set_epoch: start_batch ",
              start_batch, " is not in [0, ", size(), "], the batches of an epoch");
  epoch_ = epoch;
  start_batch_ = start_batch;
}

DataLoader::Iterator DataLoader::begin() {
  std::erase_if(runs_, [](const std::weak_ptr<detail::EpochRun>& r) { return r.expired(); });
  if (options_.persistent_workers()) {
    // The workers serve one epoch at a time.
    stop_runs("a new epoch began before this one ended; with persistent_workers one epoch runs at a time");
    if (!pool_)
      pool_ = std::make_shared<detail::WorkerPool>(options_.num_workers(), options_.worker_init_fn());
  }
  std::shared_ptr<detail::EpochRun> run;
  if (iterable_) {
    iterable_->set_epoch(epoch_++);
    run = detail::make_iterable_run(iterable_, options_, pool_);
  } else {
    // The sampler's order and the dataset's augmentation (TransformDataset) both follow the epoch.
    dataset_->set_epoch(epoch_);
    batch_sampler_->set_epoch(epoch_++);
    std::vector<std::vector<int64_t>> batches = batch_sampler_->batches();
    batches.erase(batches.begin(), batches.begin() + std::exchange(start_batch_, 0));
    run = std::make_shared<detail::MapEpochRun>(dataset_, std::move(batches), options_, pool_);
  }
  runs_.push_back(run);
  run->advance();
  return Iterator(std::move(run));
}

DataLoader::Iterator DataLoader::end() { return Iterator(); }

Example& DataLoader::Iterator::operator*() const {
  EMBER_CHECK(!at_end(), "DataLoader::Iterator: dereferencing the end of an epoch");
  return run_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  EMBER_CHECK(!at_end(), "DataLoader::Iterator: incrementing past the end of an epoch");
  run_->advance();
  return *this;
}

bool DataLoader::Iterator::at_end() const { return !run_ || run_->done(); }

bool DataLoader::Iterator::operator==(const Iterator& o) const {
  return at_end() ? o.at_end() : run_ == o.run_;
}

}  // namespace ember::data
