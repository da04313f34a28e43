#include "ember/distributed/process_group_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <thread>

#include "ember/core/error.h"
#include "ember/cuda/check.h"
#include "ember/cuda/stream.h"

namespace ember::distributed {

bool is_nccl_available() { return true; }

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

[[noreturn]] void throw_nccl_error(ncclResult_t r, ncclComm_t comm, const char* expr, const char* file,
                                   int line) {
  const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  throw Error(ember::detail::str_cat("ProcessGroupNCCL: ", expr, " failed: ", ncclGetErrorString(r),
                                     last && *last ? std::string(" (") + last + ")" : std::string(), " at ",
                                     file, ":", line));
}

// Every NCCL call goes through this; `comm` (may be null) lets the error quote NCCL's last message.
#define EMBER_NCCL_CHECK(expr, comm)                                                                    \
  do {                                                                                                  \
    ncclResult_t ember_nccl_r_ = (expr);                                                                \
    if (ember_nccl_r_ != ncclSuccess) throw_nccl_error(ember_nccl_r_, comm, #expr, __FILE__, __LINE__); \
  } while (0)

ncclDataType_t nccl_dtype(ScalarType t) {
  switch (t) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    default:  // uint8 and bool (bool never reaches a reduction)
      return ncclUint8;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return ncclSum;
    case ReduceOp::AVG:
      return ncclAvg;
    case ReduceOp::PRODUCT:
      return ncclProd;
    case ReduceOp::MIN:
      return ncclMin;
    case ReduceOp::MAX:
      return ncclMax;
  }
  return ncclSum;
}

// Makes `device` current for the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    EMBER_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) EMBER_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// A communicator on one device with its stream; aborted for good after an error or timeout.
struct DeviceComm {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* barrier_buf = nullptr;  // one float the barrier all-reduces

  bool aborted() const { return aborted_; }
  std::string abort_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    reason_ = reason;
    ncclCommAbort(comm);
    aborted_ = true;
  }

 private:
  std::mutex mu_;
  std::string reason_;
  std::atomic<bool> aborted_{false};
};

class NCCLWork : public Work {
 public:
  NCCLWork(std::string what, std::shared_ptr<DeviceComm> comm, std::vector<Tensor> tensors, bool blocking)
      : Work(std::move(what)), comm_(std::move(comm)), tensors_(std::move(tensors)), blocking_(blocking) {
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&end_, cudaEventDisableTiming));
  }
  ~NCCLWork() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }

  bool is_completed() override { return Work::is_completed() || poll(); }

  // The current stream waits for the collective; barriers (and waits with a timeout) block the
  // host until it is done.
  bool wait(milliseconds timeout) override {
    if (Work::is_completed()) return Work::wait(kNoTimeout);  // rethrows a failure
    if (blocking_ || timeout != kNoTimeout) {
      auto deadline = Clock::now() + (timeout != kNoTimeout ? timeout : milliseconds(1LL << 40));
      while (!is_completed()) {
        if (Clock::now() >= deadline) {
          fail(ember::detail::str_cat(what_, " did not finish within ", timeout.count(), " ms"), true);
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      Work::wait(kNoTimeout);
      return true;
    }
    DeviceGuard g(comm_->device);
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(comm_->device), end_, 0));
    return true;
  }

  // True (and finished) once the GPU has run it; drops the tensors it kept alive.
  bool poll() {
    std::lock_guard<std::mutex> lock(poll_mu_);
    if (Work::is_completed()) return true;
    if (comm_->aborted()) {
      finish(std::make_exception_ptr(Error(what_ + " failed: " + comm_->abort_reason())));
      return true;
    }
    cudaError_t e = cudaEventQuery(end_);
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) {
      fail(ember::detail::str_cat(what_, " failed: ", cudaGetErrorString(e)), false);
      return true;
    }
    tensors_.clear();
    finish();
    return true;
  }

  // Fails the work; with `abort`, aborts its communicator first (a timeout: the collective may
  // never end on its own).
  void fail(const std::string& msg, bool abort) {
    if (abort) comm_->abort(msg);
    std::lock_guard<std::mutex> lock(poll_mu_);
    if (!Work::is_completed()) finish(std::make_exception_ptr(Error(msg)));
  }

  Clock::time_point started = Clock::now();
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  std::shared_ptr<DeviceComm> comm_;

 private:
  std::mutex poll_mu_;  // the watchdog and a waiting thread both poll
  std::vector<Tensor> tensors_;
  bool blocking_;
};

class ProcessGroupNCCL : public ProcessGroup {
 public:
  ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, const ProcessGroupNCCLOptions& options)
      : ProcessGroup(rank, size, options),
        store_(std::move(store)),
        interval_(options.watchdog_interval),
        device_(options.device) {
    EMBER_CHECK(store_, "ProcessGroupNCCL: the store is null");
    // NVLink SHARP (multicast) needs fabric set-up that lent machines lack; opt in explicitly.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~ProcessGroupNCCL() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    for (auto& [dev, dc] : comms_) {
      DeviceGuard g(dc->device);
      bool idle = true;
      for (auto& w : pending_) idle = idle && (w->comm_ != dc || w->poll());
      // A collective still running may never end (a peer is gone): abort rather than hang.
      if (!idle || dc->aborted()) {
        dc->abort("the process group was destroyed");
      } else {
        ncclCommDestroy(dc->comm);
      }
      cudaStreamDestroy(dc->stream);
      cudaFree(dc->barrier_buf);
    }
  }

  std::string backend_name() const override { return "nccl"; }
  std::string name() const override { return "ProcessGroupNCCL"; }

 protected:
  void check_tensor(const char* op, const Tensor& t) const override {
    EMBER_CHECK(t.is_cuda(), "ProcessGroupNCCL: ", op, ": NCCL takes CUDA tensors, got one on ", t.device(),
                " (use the gloo backend for CPU tensors)");
  }

  std::shared_ptr<Work> all_reduce_impl(const Tensor& t, ReduceOp op) override {
    return launch("all_reduce", t, {t}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(
          ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype()), nccl_op(op), c, s), c);
    });
  }

  std::shared_ptr<Work> broadcast_impl(const Tensor& t, int root) override {
    return launch("broadcast", t, {t}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(
          ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype()), root, c, s), c);
    });
  }

  std::shared_ptr<Work> reduce_impl(const Tensor& t, int root, ReduceOp op) override {
    return launch("reduce", t, {t}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(
          ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype()), nccl_op(op), root, c, s),
          c);
    });
  }

  std::shared_ptr<Work> all_gather_impl(const Tensor& out, const Tensor& in) override {
    return launch("all_gather", in, {out, in}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_dtype(in.dtype()), c, s),
                       c);
    });
  }

  std::shared_ptr<Work> reduce_scatter_impl(const Tensor& out, const Tensor& in, ReduceOp op) override {
    return launch("reduce_scatter", in, {out, in}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_dtype(in.dtype()),
                                         nccl_op(op), c, s),
                       c);
    });
  }

  std::shared_ptr<Work> all_to_all_impl(const Tensor& out, const Tensor& in,
                                        const std::vector<int64_t>& out_counts,
                                        const std::vector<int64_t>& in_counts) override {
    return launch("all_to_all", in, {out, in}, false, [&](ncclComm_t c, cudaStream_t s) {
      auto dt = nccl_dtype(in.dtype());
      auto* src = static_cast<char*>(in.data_ptr());
      auto* dst = static_cast<char*>(out.data_ptr());
      size_t es = in.element_size();
      EMBER_NCCL_CHECK(ncclGroupStart(), c);
      for (int r = 0; r < size_; ++r) {
        EMBER_NCCL_CHECK(ncclSend(src, in_counts[r], dt, r, c, s), c);
        EMBER_NCCL_CHECK(ncclRecv(dst, out_counts[r], dt, r, c, s), c);
        src += in_counts[r] * es;
        dst += out_counts[r] * es;
      }
      EMBER_NCCL_CHECK(ncclGroupEnd(), c);
    });
  }

  // NCCL has no tags: sends and receives between two ranks match in the order they are posted.
  std::shared_ptr<Work> send_impl(const Tensor& t, int dst, int) override {
    return launch("send", t, {t}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(ncclSend(t.data_ptr(), t.numel(), nccl_dtype(t.dtype()), dst, c, s), c);
    });
  }

  std::shared_ptr<Work> recv_impl(const Tensor& t, int src, int) override {
    return launch("recv", t, {t}, false, [&](ncclComm_t c, cudaStream_t s) {
      EMBER_NCCL_CHECK(ncclRecv(t.data_ptr(), t.numel(), nccl_dtype(t.dtype()), src, c, s), c);
    });
  }

  // An all-reduce of one float on the device the group uses (see the options); its wait
  // blocks the host.
  std::shared_ptr<Work> barrier_impl() override {
    int device = device_;
    if (!comms_.empty()) device = comms_.begin()->first;
    if (device < 0) EMBER_CUDA_CHECK(cudaGetDevice(&device));
    return launch_on("barrier", device, {}, true, [&](ncclComm_t c, cudaStream_t s, DeviceComm& dc) {
      EMBER_NCCL_CHECK(ncclAllReduce(dc.barrier_buf, dc.barrier_buf, 1, ncclFloat32, ncclSum, c, s), c);
    });
  }

 private:
  using Launch = std::function<void(ncclComm_t, cudaStream_t)>;
  using LaunchOn = std::function<void(ncclComm_t, cudaStream_t, DeviceComm&)>;

  static int device_of(const Tensor& t) {
    int d = t.device().index;
    if (d < 0) EMBER_CUDA_CHECK(cudaGetDevice(&d));
    return d;
  }

  std::shared_ptr<Work> launch(const char* op, const Tensor& t, std::vector<Tensor> keep, bool blocking,
                               const Launch& fn) {
    return launch_on(op, device_of(t), std::move(keep), blocking,
                     [&](ncclComm_t c, cudaStream_t s, DeviceComm&) { fn(c, s); });
  }

  // Orders the NCCL stream after the current stream, enqueues the collective, records its end
  // and hands the Work to the watchdog.
  std::shared_ptr<Work> launch_on(const char* op, int device, std::vector<Tensor> keep, bool blocking,
                                  const LaunchOn& fn) {
    std::lock_guard<std::mutex> launch_lock(launch_mu_);
    DeviceGuard g(device);
    auto dc = comm_for(device);
    EMBER_CHECK(!dc->aborted(), "ProcessGroupNCCL: ", op, ": the communicator on cuda:", device,
                " was aborted after an earlier failure: ", dc->abort_reason());
    auto work = std::make_shared<NCCLWork>(describe(op, ++seq_), dc, std::move(keep), blocking);
    EMBER_CUDA_CHECK(cudaEventRecord(work->start_, cuda::current_stream(device)));
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(dc->stream, work->start_, 0));
    fn(dc->comm, dc->stream, *dc);
    EMBER_CUDA_CHECK(cudaEventRecord(work->end_, dc->stream));
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(work);
    }
    return work;
  }

  // The communicator of `device`, made on first use: rank 0 makes the unique id and shares it
  // through the store under the communicator's number (every rank makes them in one order).
  std::shared_ptr<DeviceComm> comm_for(int device) {
    auto it = comms_.find(device);
    if (it != comms_.end()) return it->second;
    auto dc = std::make_shared<DeviceComm>();
    dc->device = device;
    std::string key = "nccl_unique_id_" + std::to_string(comms_made_++);
    ncclUniqueId id;
    if (rank_ == 0) {
      EMBER_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
      store_->set(key, std::string(id.internal, sizeof(id.internal)));
    } else {
      std::string v = store_->get(key);
      EMBER_CHECK(v.size() == sizeof(id.internal), "ProcessGroupNCCL: the unique id under '", key, "' has ",
                  v.size(), " bytes, expected ", sizeof(id.internal));
      std::memcpy(id.internal, v.data(), v.size());
    }
    EMBER_NCCL_CHECK(ncclCommInitRank(&dc->comm, size_, id, rank_), nullptr);
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&dc->stream, cudaStreamNonBlocking));
    EMBER_CUDA_CHECK(cudaMalloc(&dc->barrier_buf, sizeof(float)));
    comms_[device] = dc;
    return dc;
  }

  // Finishes the works the GPU has run; aborts a communicator whose collective timed out or
  // that reports an asynchronous error, failing every work on it.
  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      for (auto it = pending_.begin(); it != pending_.end();) {
        auto& w = *it;
        try {
          DeviceGuard g(w->comm_->device);
          ncclResult_t async = ncclSuccess;
          if (!w->comm_->aborted()) ncclCommGetAsyncError(w->comm_->comm, &async);
          if (async != ncclSuccess && async != ncclInProgress) {
            w->fail(
                ember::detail::str_cat(w->what(), " failed: NCCL reported ", ncclGetErrorString(async), " (",
                                       ncclGetLastError(w->comm_->comm), "); the communicator was aborted"),
                true);
          } else if (!w->poll() && Clock::now() - w->started > options_.timeout) {
            w->fail(ember::detail::str_cat(w->what(), " timed out after ", options_.timeout.count(),
                                           " ms; the communicator was aborted"),
                    true);
          }
        } catch (const std::exception& e) {
          w->fail(w->what() + " failed: " + e.what(), false);
        }
        it = w->is_completed() ? pending_.erase(it) : std::next(it);
      }
    }
  }

  std::shared_ptr<Store> store_;
  milliseconds interval_;
  int device_;
  std::mutex launch_mu_;  // one launch at a time: NCCL calls of a communicator must not interleave
  uint64_t seq_ = 0;
  int comms_made_ = 0;
  std::map<int, std::shared_ptr<DeviceComm>> comms_;
  std::mutex mu_;  // pending_, stop_
  std::condition_variable cv_;
  std::list<std::shared_ptr<NCCLWork>> pending_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_process_group_nccl(std::shared_ptr<Store> store, int rank, int size,
                                                      ProcessGroupNCCLOptions options) {
  return std::make_shared<ProcessGroupNCCL>(std::move(store), rank, size, options);
}

}  // namespace ember::distributed
