#pragma once

// One epoch of a DataLoader, what its iterators walk: the batches of a map-style dataset built by
// index (dataloader.cpp), or of an IterableDataset's streams (iterable_epoch_run.cpp), by the
// loop's thread or by worker threads.

#include <memory>
#include <string>
#include <vector>

#include "ember/data/dataloader.h"

namespace ember::data::detail {

class EpochRun {
 public:
  virtual ~EpochRun() = default;
  // Makes the next batch current; false when the epoch is over. Rethrows a failed batch's error.
  virtual bool advance() = 0;
  virtual Example& current() = 0;
  virtual bool done() const = 0;
  // Stops and joins the workers (each finishes the batch it is building).
  virtual void stop() = 0;
};

std::shared_ptr<EpochRun> make_iterable_run(std::shared_ptr<const IterableDataset> dataset,
                                            const DataLoaderOptions& options);

// What both runs share: the message of the exception being handled; this thread as worker `info`
// of get_worker_info(); a batch collated from samples and pinned when asked.
std::string current_exception_message();
void set_worker_info(WorkerInfo info);
Example collate_batch(std::vector<Example> samples, const CollateFn& collate, bool pin_memory);

}  // namespace ember::data::detail
