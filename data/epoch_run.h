#pragma once

// One epoch of a DataLoader, what its iterators walk: the batches of a map-style dataset built by
// index (dataloader.cpp), or of an IterableDataset's streams (iterable_epoch_run.cpp), by the
// loop's thread or by worker threads.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ember/data/dataloader.h"
#include "ember/data/worker_pool.h"

namespace ember::data::detail {

// The loop's current batch, the workers and the lock they share live here; a run gives advance()
// and what its workers do.
class EpochRun {
 public:
  virtual ~EpochRun() = default;
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  // Makes the next batch current; false when the epoch is over. Rethrows a failed batch's error.
  virtual bool advance() = 0;
  Example& current() { return current_; }
  bool done() const { return finished_; }
  // Stops and joins the workers (each finishes the batch it is building). A run calls it in its
  // destructor, while the members its workers use are still there.
  void stop();
  // Stops the run from outside: the loop's next advance() fails with "DataLoader: " + why.
  void interrupt(const std::string& why);

 protected:
  EpochRun() = default;
  // Runs job on `n` workers: the loader's persistent ones (`pool`), or threads of this epoch that
  // first run `init` (if one cannot start, the others stop and the error is rethrown).
  void start_workers(int64_t n, const WorkerInitFn& init, const std::shared_ptr<WorkerPool>& pool,
                     WorkerJob job);
  int64_t workers() const { return workers_; }
  // Ends the epoch (the workers stop), and with an error: rethrown in the loop as ember::Error.
  void finish();
  [[noreturn]] void fail(const std::string& error);
  // Fails with what interrupted the run; called without the lock, after a wait saw stopped_.
  [[noreturn]] void fail_interrupted();

  // The loop's thread only.
  Example current_;
  bool finished_ = false;

  std::mutex mutex_;  // guards what follows, and the state a run's workers share with the loop
  std::condition_variable built_, taken_;  // a batch was built; a batch was taken, or the run stopped
  bool stopped_ = false;

 private:
  std::string interrupted_by_;  // set by interrupt(), before stopped_
  int64_t workers_ = 0;
  std::shared_ptr<WorkerPool> pool_;  // running this epoch's job, or
  std::vector<std::thread> threads_;  // this epoch's own; started last, by the run's constructor
};

std::shared_ptr<EpochRun> make_iterable_run(std::shared_ptr<const IterableDataset> dataset,
                                            const DataLoaderOptions& options,
                                            std::shared_ptr<WorkerPool> pool);

// What both runs share: the message of the exception being handled; this thread as worker `info`
// of get_worker_info(); a batch collated from samples and pinned when asked.
std::string current_exception_message();
void set_worker_info(WorkerInfo info);
Example collate_batch(std::vector<Example> samples, const CollateFn& collate, bool pin_memory);

}  // namespace ember::data::detail
