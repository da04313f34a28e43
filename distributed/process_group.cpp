#include "ember/distributed/process_group.h"

#include <numeric>

#include "ember/core/factories.h"
#include "ember/core/ops/shape_ops.h"

namespace ember::distributed {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::PRODUCT:
      return "PRODUCT";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::MAX:
      return "MAX";
  }
  return "?";
}

// --- Work ---

bool Work::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

bool Work::is_success() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    completed_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

void Work::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });
  } else {
    EMBER_CHECK(cv_.wait_for(lock, timeout, [this] { return completed_; }), what_, " did not finish within ",
                timeout.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::wait(std::chrono::milliseconds timeout) {
  wait_finished(timeout);
  return true;
}

std::shared_ptr<Work> completed_work(std::string what) {
  auto w = std::make_shared<Work>(std::move(what));
  w->finish();
  return w;
}

namespace {

// A collective followed by host-side work on its result (copying a flat buffer into the
// caller's list of tensors), run once when the collective is seen finished.
class ThenWork : public Work {
 public:
  ThenWork(std::shared_ptr<Work> inner, std::function<void()> then)
      : Work(inner->what()), inner_(std::move(inner)), then_(std::move(then)) {}

  bool is_completed() override {
    if (!inner_->is_completed()) return false;
    settle();
    return true;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    try {
      inner_->wait(timeout);
    } catch (...) {
      if (inner_->is_completed()) settle();
      throw;
    }
    settle();
    return Work::wait(kNoTimeout);
  }

 private:
  void settle() {
    std::call_once(once_, [this] {
      std::exception_ptr e = inner_->exception();
      if (!e) {
        try {
          then_();
        } catch (...) {
          e = std::current_exception();
        }
      }
      finish(e);
    });
  }

  std::shared_ptr<Work> inner_;
  std::function<void()> then_;
  std::once_flag once_;
};

const char* kOpNames[] = {"all_reduce",
                          "broadcast",
                          "reduce",
                          "all_gather",
                          "all_gather_into_tensor",
                          "reduce_scatter",
                          "reduce_scatter_tensor",
                          "all_to_all",
                          "all_to_all_single",
                          "send",
                          "recv",
                          "barrier"};

}  // namespace

// --- ProcessGroup: argument checks shared by the backends ---

ProcessGroup::ProcessGroup(int rank, int size, Options options)
    : rank_(rank), size_(size), options_(options) {
  EMBER_CHECK(size >= 1 && rank >= 0 && rank < size, "ProcessGroup: rank ", rank, " is not in [0, ", size,
              ") (world size ", size, ")");
  EMBER_CHECK(options.timeout.count() > 0, "ProcessGroup: timeout must be positive, got ",
              options.timeout.count(), " ms");
}

std::string ProcessGroup::describe(const char* op, uint64_t seq) const {
  return ember::detail::str_cat(name(), ": ", op, " #", seq, " (rank ", rank_, " of ", size_, ")");
}

namespace {

void check_dense(const char* op, const Tensor& t, const char* name = "tensor") {
  EMBER_CHECK(t.defined(), op, ": ", name, " is undefined");
  EMBER_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(), ", strides ",
              t.strides(), ")");
}

void check_reduce_op(const char* op, const Tensor& t, ReduceOp rop) {
  EMBER_CHECK(t.dtype() != kBool, op, ": cannot reduce a bool tensor (", to_string(rop), ")");
  EMBER_CHECK(rop != ReduceOp::AVG || t.is_floating_point(), op,
              ": ReduceOp AVG needs a floating-point tensor, got ", t.dtype());
}

void check_rank(const char* op, const char* what, int r, int size) {
  EMBER_CHECK(r >= 0 && r < size, op, ": ", what, " ", r, " is not a rank of the group (size ", size, ")");
}

void check_like(const char* op, const Tensor& t, const Tensor& ref, const char* name, size_t i) {
  check_dense(op, t, name);
  EMBER_CHECK(t.dtype() == ref.dtype() && t.device() == ref.device(), op, ": ", name, "[", i, "] is ",
              t.dtype(), " on ", t.device(), ", expected ", ref.dtype(), " on ", ref.device());
}

}  // namespace

// The backends get the tensors without their autograd history (detach(): the same memory). A
// queued collective holds its tensors until its job ends on the backend's thread; a graph kept
// alive through them can hold the last reference to this group (the tensor-parallel regions'
// backwards capture it), whose destructor would then join that thread from itself (seen as
// "Resource deadlock avoided" at a worker's exit).
namespace {
// A tensor a collective writes into: its version moves as an in-place op's does, so autograd's
// check of saved tensors (and anything keyed on versions) sees the change.
Tensor written(const Tensor& t) {
  t.bump_version();
  return t.detach();
}
}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_dense(kOpNames[0], tensor);
  check_tensor(kOpNames[0], tensor);
  check_reduce_op(kOpNames[0], tensor, op);
  return all_reduce_impl(written(tensor), op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_dense(kOpNames[1], tensor);
  check_tensor(kOpNames[1], tensor);
  check_rank(kOpNames[1], "root", root, size_);
  return broadcast_impl(root == rank_ ? tensor.detach() : written(tensor), root);
}

std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_dense(kOpNames[2], tensor);
  check_tensor(kOpNames[2], tensor);
  check_rank(kOpNames[2], "root", root, size_);
  check_reduce_op(kOpNames[2], tensor, op);
  return reduce_impl(root == rank_ ? written(tensor) : tensor.detach(), root, op);
}

std::shared_ptr<Work> ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  const char* op = kOpNames[3];
  check_dense(op, input, "input");
  check_tensor(op, input);
  EMBER_CHECK(outputs.size() == static_cast<size_t>(size_), op, ": got ", outputs.size(),
              " output tensors for a group of size ", size_);
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_like(op, outputs[i], input, "outputs", i);
    EMBER_CHECK(outputs[i].sizes().equals(input.sizes()), op, ": outputs[", i, "] has shape ",
                outputs[i].sizes(), ", input has ", input.sizes());
  }
  Tensor flat = empty({size_ * input.numel()}, input.options());
  auto work = all_gather_impl(flat, input.detach());
  return std::make_shared<ThenWork>(work, [flat, outputs, n = input.numel()] {
    for (size_t i = 0; i < outputs.size(); ++i)
      outputs[i].view({n}).copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n));
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  const char* op = kOpNames[4];
  check_dense(op, input, "input");
  check_tensor(op, input);
  check_like(op, output, input, "output", 0);
  EMBER_CHECK(output.numel() == size_ * input.numel(), op, ": output has ", output.numel(),
              " elements (shape ", output.sizes(), "), expected ", size_, " x ", input.numel(),
              " (group size x input ", input.sizes(), ")");
  return all_gather_impl(written(output), input.detach());
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                   ReduceOp op) {
  const char* name = kOpNames[5];
  check_dense(name, output, "output");
  check_tensor(name, output);
  check_reduce_op(name, output, op);
  EMBER_CHECK(inputs.size() == static_cast<size_t>(size_), name, ": got ", inputs.size(),
              " input tensors for a group of size ", size_);
  std::vector<Tensor> flat;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_like(name, inputs[i], output, "inputs", i);
    EMBER_CHECK(inputs[i].sizes().equals(output.sizes()), name, ": inputs[", i, "] has shape ",
                inputs[i].sizes(), ", output has ", output.sizes());
    flat.push_back(inputs[i].reshape({-1}));
  }
  return reduce_scatter_impl(written(output), cat(flat).detach(), op);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                                          ReduceOp op) {
  const char* name = kOpNames[6];
  check_dense(name, output, "output");
  check_tensor(name, output);
  check_reduce_op(name, output, op);
  check_like(name, input, output, "input", 0);
  EMBER_CHECK(input.numel() == size_ * output.numel(), name, ": input has ", input.numel(),
              " elements (shape ", input.sizes(), "), expected ", size_, " x ", output.numel(),
              " (group size x output ", output.sizes(), ")");
  return reduce_scatter_impl(written(output), input.detach(), op);
}

std::shared_ptr<Work> ProcessGroup::all_to_all(const std::vector<Tensor>& outputs,
                                               const std::vector<Tensor>& inputs) {
  const char* op = kOpNames[7];
  EMBER_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_), op,
              ": got ", outputs.size(), " outputs and ", inputs.size(), " inputs for a group of size ",
              size_);
  check_dense(op, inputs[0], "inputs[0]");
  check_tensor(op, inputs[0]);
  std::vector<Tensor> flat_in;
  std::vector<int64_t> out_counts, in_counts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_like(op, inputs[i], inputs[0], "inputs", i);
    check_like(op, outputs[i], inputs[0], "outputs", i);
    flat_in.push_back(inputs[i].reshape({-1}));
    in_counts.push_back(inputs[i].numel());
    out_counts.push_back(outputs[i].numel());
  }
  int64_t total_out = std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0});
  Tensor flat_out = empty({total_out}, inputs[0].options());
  auto work = all_to_all_impl(flat_out, cat(flat_in).detach(), out_counts, in_counts);
  return std::make_shared<ThenWork>(work, [flat_out, outputs, out_counts] {
    int64_t off = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].view({out_counts[i]}).copy_(flat_out.narrow(0, off, out_counts[i]));
      off += out_counts[i];
    }
  });
}

namespace {

// Element counts per rank from row split sizes along dim 0 (equal parts when none are given).
std::vector<int64_t> split_counts(const char* op, const char* name, const Tensor& t,
                                  const std::vector<int64_t>& splits, int size) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  int64_t row_numel = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> counts;
  if (splits.empty()) {
    EMBER_CHECK(rows % size == 0, op, ": ", name, " has ", rows, " rows (shape ", t.sizes(),
                "), not divisible by the group size ", size, " (pass split sizes)");
    counts.assign(size, rows / size * row_numel);
    return counts;
  }
  EMBER_CHECK(splits.size() == static_cast<size_t>(size), op, ": ", name, "_split_sizes has ", splits.size(),
              " entries for a group of size ", size);
  int64_t sum = 0;
  for (int64_t s : splits) {
    EMBER_CHECK(s >= 0, op, ": ", name, "_split_sizes has a negative entry ", s);
    sum += s;
    counts.push_back(s * row_numel);
  }
  EMBER_CHECK(sum == rows, op, ": ", name, "_split_sizes add up to ", sum, " rows, but ", name, " has ", rows,
              " (shape ", t.sizes(), ")");
  return counts;
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input,
                                                      const std::vector<int64_t>& output_split_sizes,
                                                      const std::vector<int64_t>& input_split_sizes) {
  const char* op = kOpNames[8];
  check_dense(op, input, "input");
  check_tensor(op, input);
  check_like(op, output, input, "output", 0);
  return all_to_all_impl(written(output), input.detach(),
                         split_counts(op, "output", output, output_split_sizes, size_),
                         split_counts(op, "input", input, input_split_sizes, size_));
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_dense(kOpNames[9], tensor);
  check_tensor(kOpNames[9], tensor);
  check_rank(kOpNames[9], "dst", dst, size_);
  EMBER_CHECK(dst != rank_, "send: rank ", rank_, " cannot send to itself");
  EMBER_CHECK(tag >= 0, "send: tag must be non-negative, got ", tag);
  return send_impl(tensor.detach(), dst, tag);
}

std::shared_ptr<Work> ProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  check_dense(kOpNames[10], tensor);
  check_tensor(kOpNames[10], tensor);
  check_rank(kOpNames[10], "src", src, size_);
  EMBER_CHECK(src != rank_, "recv: rank ", rank_, " cannot receive from itself");
  EMBER_CHECK(tag >= 0, "recv: tag must be non-negative, got ", tag);
  return recv_impl(written(tensor), src, tag);
}

std::shared_ptr<Work> ProcessGroup::barrier() { return barrier_impl(); }

}  // namespace ember::distributed
