#pragma once

// A DataLoader's persistent workers (persistent_workers(true)): threads that outlive an epoch and
// run each epoch's job in turn. Each thread takes its worker info and runs worker_init_fn once, as
// it starts, and hands what that threw to every job.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ember/data/dataloader.h"

namespace ember::data::detail {

// What a worker runs in an epoch: its id, and what its worker_init_fn threw ("" when it did not).
using WorkerJob = std::function<void(int64_t w, const std::string& init_error)>;

// Sets this thread's worker info and runs `init` for worker w of n: "" or the error it threw.
std::string start_worker(const WorkerInitFn& init, int64_t w, int64_t n);

class WorkerPool {
 public:
  WorkerPool(int64_t n, WorkerInitFn init);
  ~WorkerPool();  // joins the threads (no job may be running)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts job on every worker and returns; the previous job must have finished (wait()).
  void run(WorkerJob job);
  // Returns when every worker has finished the current job.
  void wait();

 private:
  void loop(int64_t w, const WorkerInitFn& init);

  const int64_t n_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable posted_, finished_;
  WorkerJob job_;
  uint64_t generation_ = 0;  // jobs posted so far
  int64_t busy_ = 0;         // workers still running the current job
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ember::data::detail
