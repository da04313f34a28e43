#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::distributed {

enum class ReduceOp { SUM, AVG, PRODUCT, MIN, MAX };
std::string_view to_string(ReduceOp op);

// One asynchronous collective (c10d::Work). The backend finishes it from its own thread.
class Work {
 public:
  static constexpr std::chrono::milliseconds kNoTimeout{0};

  // `what` names the collective in errors: "ProcessGroupGloo: all_reduce #3 (rank 1 of 4)".
  explicit Work(std::string what) : what_(std::move(what)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual bool is_completed();
  bool is_success();
  // The error the collective ended with, or null.
  std::exception_ptr exception();
  // CPU backends: blocks until the collective finishes. CUDA (NCCL): makes the current stream
  // wait for it and returns at once. Rethrows its error as ember::Error; with a timeout (other
  // than kNoTimeout) gives up waiting after it with an error naming the collective.
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout);
  const std::string& what() const { return what_; }

  // Called by the backend once: the collective finished, successfully when `error` is null.
  void finish(std::exception_ptr error = nullptr);

 protected:
  // Blocks until finish() ran or the timeout passed; throws on the timeout or the error.
  void wait_finished(std::chrono::milliseconds timeout);

  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool completed_ = false;
  std::exception_ptr error_;
};

// A Work that is already finished (world size 1, nothing to do).
std::shared_ptr<Work> completed_work(std::string what);

// A group of processes that run collectives together (c10d::ProcessGroup). Every rank calls
// the same collectives in the same order. Tensors must be dense (contiguous) and stay alive
// and untouched until the Work finishes. The public calls check their arguments (sizes,
// dtypes, ranks, the same on every rank where that can be checked locally) and the backends
// implement the *_impl calls.
class ProcessGroup {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{600'000};
  struct Options {
    // A collective that has not finished after this long fails (and, for NCCL, aborts the
    // communicator).
    std::chrono::milliseconds timeout = kDefaultTimeout;
  };

  ProcessGroup(int rank, int size, Options options);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Options& options() const { return options_; }
  virtual std::string backend_name() const = 0;  // "gloo", "nccl"
  virtual std::string name() const = 0;          // "ProcessGroupGloo"

  // In place: every rank's tensor becomes the reduction of all ranks' tensors.
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM);
  // In place: every rank's tensor becomes root's.
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0);
  // In place on root: its tensor becomes the reduction; the others' are left as they were (or
  // used as scratch space: do not rely on them).
  std::shared_ptr<Work> reduce(const Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::SUM);
  // outputs[r] receives rank r's input (size() tensors shaped like input). The outputs are
  // filled when wait() (or a true is_completed()) returns.
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
  // output has size() times input's elements: rank r's input lands in its r-th slice along dim 0.
  std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input);
  // output receives the reduction of inputs[rank()] over all ranks (inputs: size() tensors
  // shaped like output).
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::SUM);
  // input has size() times output's elements; output receives the reduction of slice rank().
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                              ReduceOp op = ReduceOp::SUM);
  // inputs[r] goes to rank r; outputs[r] comes from rank r (shapes may differ per rank; each
  // outputs[r] must match what rank r sends). Outputs are filled when wait() returns.
  std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs);
  // Splits input along dim 0 into size() parts (equal, or input_split_sizes rows), sends part r
  // to rank r and concatenates what arrives into output (output_split_sizes rows from each).
  std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                          const std::vector<int64_t>& output_split_sizes = {},
                                          const std::vector<int64_t>& input_split_sizes = {});
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0);
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag = 0);
  std::shared_ptr<Work> barrier();

 protected:
  // Names a collective in messages: "ProcessGroupGloo: all_reduce #3 (rank 1 of 4)".
  std::string describe(const char* op, uint64_t seq) const;

  virtual std::shared_ptr<Work> all_reduce_impl(const Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast_impl(const Tensor& tensor, int root) = 0;
  virtual std::shared_ptr<Work> reduce_impl(const Tensor& tensor, int root, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> all_gather_impl(const Tensor& output, const Tensor& input) = 0;
  virtual std::shared_ptr<Work> reduce_scatter_impl(const Tensor& output, const Tensor& input,
                                                    ReduceOp op) = 0;
  // counts in elements: input_counts[r] go to rank r, output_counts[r] come from rank r.
  virtual std::shared_ptr<Work> all_to_all_impl(const Tensor& output, const Tensor& input,
                                                const std::vector<int64_t>& output_counts,
                                                const std::vector<int64_t>& input_counts) = 0;
  virtual std::shared_ptr<Work> send_impl(const Tensor& tensor, int dst, int tag) = 0;
  virtual std::shared_ptr<Work> recv_impl(const Tensor& tensor, int src, int tag) = 0;
  virtual std::shared_ptr<Work> barrier_impl() = 0;

  // What the backend accepts: checks device and dtype of a tensor handed to `op`.
  virtual void check_tensor(const char* op, const Tensor& t) const = 0;

  int rank_;
  int size_;
  Options options_;
};

}  // namespace ember::distributed
