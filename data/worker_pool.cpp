#include "ember/data/worker_pool.h"

#include "ember/data/epoch_run.h"

namespace ember::data::detail {

std::string start_worker(const WorkerInitFn& init, int64_t w, int64_t n) {
  set_worker_info(WorkerInfo{w, n});
  if (!init) return "";
  try {
    init(w);
  } catch (...) {
    return "DataLoader: worker_init_fn of worker " + std::to_string(w) + ": " + current_exception_message();
  }
  return "";
}

WorkerPool::WorkerPool(int64_t n, WorkerInitFn init) : n_(n) {
  try {
    for (int64_t w = 0; w < n; ++w) threads_.emplace_back([this, w, init] { loop(w, init); });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    posted_.notify_all();
    for (std::thread& t : threads_) t.join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  posted_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::run(WorkerJob job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_CHECK(busy_ == 0, "DataLoader: the persistent workers are still running the previous epoch");
    job_ = std::move(job);
    ++generation_;
    busy_ = n_;
  }
  posted_.notify_all();
}

void WorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return busy_ == 0; });
}

void WorkerPool::loop(int64_t w, const WorkerInitFn& init) {
  const std::string init_error = start_worker(init, w, n_);
  uint64_t done = 0;
  for (;;) {
    WorkerJob job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      posted_.wait(lock, [&] { return quit_ || generation_ != done; });
      if (quit_) return;
      done = generation_;
      job = job_;
    }
    job(w, init_error);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    finished_.notify_all();
  }
}

}  // namespace ember::data::detail
