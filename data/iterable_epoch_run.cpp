// One epoch of an IterableDataset. Without workers, the loop's thread pulls batch_size samples
// from one stream per batch. With workers, each worker thread runs its worker_init_fn, starts its
// own stream and queues its batches, at most prefetch_factor ahead; the loop takes a batch from
// each worker in turn and drops a worker from the turn when its stream ends: PyTorch's order.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "ember/data/epoch_run.h"

namespace ember::data::detail {
namespace {

class IterableEpochRun final : public EpochRun {
 public:
  IterableEpochRun(std::shared_ptr<const IterableDataset> dataset, const DataLoaderOptions& o,
                   const std::shared_ptr<WorkerPool>& pool)
      : dataset_(std::move(dataset)), options_(o), queues_(static_cast<size_t>(o.num_workers())) {
    if (o.num_workers() == 0) {
      try {
        stream_ = dataset_->iter();
      } catch (...) {
        throw Error("DataLoader: the dataset's iter(): " + current_exception_message());
      }
      return;
    }
    for (int64_t w = 0; w < o.num_workers(); ++w) live_.push_back(w);
    start_workers(o.num_workers(), o.worker_init_fn(), pool,
                  [this](int64_t w, const std::string& init_error) { work(w, init_error); });
  }
  ~IterableEpochRun() override { stop(); }

  bool advance() override {
    current_.clear();
    if (finished_) return false;
    for (;;) {
      Result r;
      if (workers() == 0) {
        r = next_batch(stream_, "", batches_);
      } else {
        if (live_.empty()) break;
        std::deque<Result>& queue = queues_[static_cast<size_t>(live_[turn_])];
        {
          std::unique_lock<std::mutex> lock(mutex_);
          built_.wait(lock, [&] { return !queue.empty() || stopped_; });
          if (stopped_) {
            lock.unlock();
            fail_interrupted();
          }
          r = std::move(queue.front());
          queue.pop_front();
        }
        taken_.notify_all();
        if (r.end) {
          live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(turn_));
          if (turn_ == live_.size()) turn_ = 0;
          continue;
        }
        turn_ = (turn_ + 1) % live_.size();
      }
      if (!r.error.empty()) fail(r.error);
      if (r.end) break;
      current_ = std::move(r.batch);
      ++batches_;
      return true;
    }
    finish();
    return false;
  }

 private:
  struct Result {
    Example batch;
    std::string error;  // set instead of batch when building failed
    bool end = false;   // the stream has no batch left
  };

  // Batch k of `stream`: batch_size samples collated (fewer at the end, unless drop_last), `end`
  // when none are left, or what went wrong.
  Result next_batch(SampleGenerator& stream, const std::string& who, int64_t k) const {
    const std::string head = "DataLoader: " + who + "batch " + std::to_string(k);
    std::vector<Example> samples;
    while (static_cast<int64_t>(samples.size()) < options_.batch_size()) {
      std::optional<Example> sample;
      try {
        sample = stream();
      } catch (...) {
        return {{},
                head + ", sample " + std::to_string(samples.size()) + ": " + current_exception_message(),
                false};
      }
      if (!sample) break;
      samples.push_back(std::move(*sample));
    }
    const int64_t n = static_cast<int64_t>(samples.size());
    if (n == 0 || (options_.drop_last() && n < options_.batch_size())) return {{}, {}, true};
    try {
      return {collate_batch(std::move(samples), options_.collate_fn(), options_.pin_memory()), {}, false};
    } catch (...) {
      return {{}, head + " (collate): " + current_exception_message(), false};
    }
  }

  void work(int64_t w, const std::string& init_error) {
    const std::string who = "worker " + std::to_string(w) + ", ";
    SampleGenerator stream;
    std::string error = init_error;
    if (error.empty()) {
      try {
        stream = dataset_->iter();
      } catch (...) {
        error = "DataLoader: " + who + "the dataset's iter(): " + current_exception_message();
      }
    }
    std::deque<Result>& queue = queues_[static_cast<size_t>(w)];
    for (int64_t k = 0;; ++k) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        taken_.wait(lock, [&] {
          return stopped_ || static_cast<int64_t>(queue.size()) < options_.prefetch_factor();
        });
        if (stopped_) return;
      }
      Result r = error.empty() ? next_batch(stream, who, k) : Result{{}, error, false};
      const bool last = r.end || !r.error.empty();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        queue.push_back(std::move(r));
      }
      built_.notify_all();
      if (last) return;
    }
  }

  const std::shared_ptr<const IterableDataset> dataset_;
  const DataLoaderOptions options_;

  // The loop's thread only.
  SampleGenerator stream_;     // without workers
  std::vector<int64_t> live_;  // workers whose stream has not ended, in turn order
  size_t turn_ = 0;            // the index in live_ of the worker whose batch comes next
  int64_t batches_ = 0;

  std::vector<std::deque<Result>> queues_;  // per worker, in its batch order; guarded by mutex_
};

}  // namespace

std::shared_ptr<EpochRun> make_iterable_run(std::shared_ptr<const IterableDataset> dataset,
                                            const DataLoaderOptions& options,
                                            std::shared_ptr<WorkerPool> pool) {
  return std::make_shared<IterableEpochRun>(std::move(dataset), options, pool);
}

}  // namespace ember::data::detail
