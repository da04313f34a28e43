#include "ember/data/epoch_run.h"

#include <exception>

namespace ember::data {
namespace {

thread_local std::optional<WorkerInfo> tls_worker_info;

}  // namespace

std::optional<WorkerInfo> get_worker_info() { return tls_worker_info; }

namespace detail {

std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void set_worker_info(WorkerInfo info) { tls_worker_info = info; }

void EpochRun::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  taken_.notify_all();
  built_.notify_all();
  if (pool_) pool_->wait();
  for (std::thread& t : threads_) t.join();
}

void EpochRun::interrupt(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopped_) interrupted_by_ = why;
  }
  stop();
}

void EpochRun::start_workers(int64_t n, const WorkerInitFn& init, const std::shared_ptr<WorkerPool>& pool,
                             WorkerJob job) {
  workers_ = n;
  if (n == 0) return;
  if (pool) {
    pool_ = pool;
    pool->run(std::move(job));
    return;
  }
  try {
    for (int64_t w = 0; w < n; ++w) threads_.emplace_back([=] { job(w, start_worker(init, w, n)); });
  } catch (...) {
    stop();  // join the ones that started
    throw;
  }
}

void EpochRun::finish() {
  finished_ = true;
  stop();
}

void EpochRun::fail(const std::string& error) {
  finish();
  throw Error(error);
}

void EpochRun::fail_interrupted() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    why = interrupted_by_;
  }
  fail("DataLoader: " + why);
}

Example collate_batch(std::vector<Example> samples, const CollateFn& collate, bool pin_memory) {
  Example batch = collate(std::move(samples));
  if (pin_memory)
    for (Tensor& t : batch) t = t.pin_memory();
  return batch;
}

}  // namespace detail
}  // namespace ember::data
