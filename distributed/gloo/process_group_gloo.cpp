#include "ember/distributed/process_group_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <thread>

#include "ember/core/error.h"

namespace ember::distributed {

bool is_gloo_available() { return true; }

namespace {

using std::chrono::milliseconds;

// Our Store seen as Gloo's rendezvous store.
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<distributed::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<distributed::Store> store_;
};

// A thread that runs tasks in the order they were queued, finishing each task's Work with the
// task's error, if any.
class TaskQueue {
 public:
  TaskQueue() : thread_([this] { run(); }) {}
  ~TaskQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::shared_ptr<Work> work, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.emplace_back(std::move(work), std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    for (;;) {
      std::pair<std::shared_ptr<Work>, std::function<void()>> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        // A group destroyed with work still queued fails it rather than starting it.
        if (stop_) {
          lock.unlock();
          task.first->finish(
              std::make_exception_ptr(Error(task.first->what() + " failed: the group was destroyed")));
          continue;
        }
      }
      auto& [work, fn] = task;
      try {
        fn();
        work->finish();
      } catch (const std::exception& e) {
        work->finish(std::make_exception_ptr(Error(work->what() + " failed: " + e.what())));
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Work>, std::function<void()>>> tasks_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

// Gloo's algorithms only use the element type for its size (visit_element_size); reductions get
// our own function.
// Reduced floats combine in float32 and round once per pair, like PyTorch's Gloo backend.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class T, ReduceOp kOp>
void combine(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    Acc<T> u = x[i], v = y[i];
    if constexpr (kOp == ReduceOp::SUM) o[i] = static_cast<T>(u + v);
    if constexpr (kOp == ReduceOp::PRODUCT) o[i] = static_cast<T>(u * v);
    if constexpr (kOp == ReduceOp::MIN) o[i] = static_cast<T>(v < u ? v : u);
    if constexpr (kOp == ReduceOp::MAX) o[i] = static_cast<T>(v > u ? v : u);
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

ReduceFn reduce_fn(ScalarType dtype, ReduceOp op) {
  return visit_dtype(dtype, [op](auto tag) -> ReduceFn {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::PRODUCT:
        return &combine<T, ReduceOp::PRODUCT>;
      case ReduceOp::MIN:
        return &combine<T, ReduceOp::MIN>;
      case ReduceOp::MAX:
        return &combine<T, ReduceOp::MAX>;
      default:  // SUM, and AVG (a sum divided afterwards)
        return &combine<T, ReduceOp::SUM>;
    }
  });
}

std::string default_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "127.0.0.1";
  return name;
}

class ProcessGroupGloo : public ProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size, const ProcessGroupGlooOptions& options)
      : ProcessGroup(rank, size, options) {
    EMBER_CHECK(store, "ProcessGroupGloo: the store is null");
    gloo::transport::tcp::attr attr;
    const char* env_iface = std::getenv("GLOO_SOCKET_IFNAME");
    if (!options.interface.empty()) {
      attr.iface = options.interface;
    } else if (env_iface && *env_iface && options.hostname.empty()) {
      attr.iface = env_iface;
    } else {
      attr.hostname = options.hostname.empty() ? default_hostname() : options.hostname;
    }
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context->setTimeout(options.timeout);
      GlooStore gloo_store(store);
      context->connectFullMesh(gloo_store, device);
      context_ = std::move(context);
      // A rank that returned from connectFullMesh may otherwise exit (or fail) while a peer is
      // still finishing its half of the connections, which would then fail on that peer.
      if (store->add("connected", 1) == size) store->set("all_connected", "");
      store->wait({"all_connected"});
    } catch (const std::exception& e) {
      throw Error(ember::detail::str_cat(
          "ProcessGroupGloo: rank ", rank, " of ", size, " could not connect to its peers (",
          attr.iface.empty() ? "host " + attr.hostname : "interface " + attr.iface, "): ", e.what()));
    }
  }

  ~ProcessGroupGloo() override {
    collectives_.reset();
    p2p_.reset();
  }

  std::string backend_name() const override { return "gloo"; }
  std::string name() const override { return "ProcessGroupGloo"; }

 protected:
  void check_tensor(const char* op, const Tensor& t) const override {
    EMBER_CHECK(t.is_cpu(), "ProcessGroupGloo: ", op, ": Gloo takes CPU tensors, got one on ", t.device(),
                " (use the nccl backend for CUDA tensors)");
  }

  std::shared_ptr<Work> all_reduce_impl(const Tensor& tensor, ReduceOp op) override {
    return enqueue("all_reduce", [this, tensor, op](uint32_t tag) { all_reduce_now(tensor, op, tag); });
  }

  std::shared_ptr<Work> broadcast_impl(const Tensor& tensor, int root) override {
    return enqueue("broadcast", [this, tensor, root](uint32_t tag) {
      gloo::BroadcastOptions o(context_);
      o.setOutput(static_cast<uint8_t*>(tensor.data_ptr()), tensor.nbytes());
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(options_.timeout);
      gloo::broadcast(o);
    });
  }

  std::shared_ptr<Work> reduce_impl(const Tensor& tensor, int root, ReduceOp op) override {
    return enqueue("reduce", [this, tensor, root, op](uint32_t tag) {
      visit_element_size(tensor.element_size(), [&](auto carrier) {
        using C = decltype(carrier);
        gloo::ReduceOptions o(context_);
        o.setOutput(static_cast<C*>(tensor.data_ptr()), static_cast<size_t>(tensor.numel()));
        o.setRoot(root);
        o.setReduceFunction(reduce_fn(tensor.dtype(), op));
        o.setTag(tag);
        o.setTimeout(options_.timeout);
        gloo::reduce(o);
      });
      if (op == ReduceOp::AVG && rank_ == root) tensor.div_(size_);
    });
  }

  std::shared_ptr<Work> all_gather_impl(const Tensor& output, const Tensor& input) override {
    return enqueue("all_gather", [this, output, input](uint32_t tag) {
      gloo::AllgatherOptions o(context_);
      o.setInput(static_cast<uint8_t*>(input.data_ptr()), input.nbytes());
      o.setOutput(static_cast<uint8_t*>(output.data_ptr()), output.nbytes());
      o.setTag(tag);
      o.setTimeout(options_.timeout);
      gloo::allgather(o);
    });
  }

  // Gloo has no reduce-scatter with a custom reduction: all-reduce a copy, keep our slice.
  std::shared_ptr<Work> reduce_scatter_impl(const Tensor& output, const Tensor& input, ReduceOp op) override {
    return enqueue("reduce_scatter", [this, output, input, op](uint32_t tag) {
      Tensor all = input.reshape({-1}).clone();
      all_reduce_now(all, op, tag);
      int64_t n = output.numel();
      output.view({n}).copy_(all.narrow(0, rank_ * n, n));
    });
  }

  std::shared_ptr<Work> all_to_all_impl(const Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_counts,
                                        const std::vector<int64_t>& input_counts) override {
    auto bytes = [es = static_cast<int64_t>(input.element_size())](std::vector<int64_t> v) {
      for (auto& x : v) x *= es;
      return v;
    };
    return enqueue("all_to_all",
                   [this, output, input, out = bytes(output_counts), in = bytes(input_counts)](uint32_t tag) {
                     gloo::AlltoallvOptions o(context_);
                     o.setInput(static_cast<uint8_t*>(input.data_ptr()), in);
                     o.setOutput(static_cast<uint8_t*>(output.data_ptr()), out);
                     o.setTag(tag);
                     o.setTimeout(options_.timeout);
                     gloo::alltoallv(o);
                   });
  }

  // Posted at once (so that a send and the matching recv never wait on each other's queue);
  // a second thread waits for them in order and finishes their Works.
  std::shared_ptr<Work> send_impl(const Tensor& tensor, int dst, int tag) override {
    return post_p2p("send", tensor, dst, tag, true);
  }
  std::shared_ptr<Work> recv_impl(const Tensor& tensor, int src, int tag) override {
    return post_p2p("recv", tensor, src, tag, false);
  }

  std::shared_ptr<Work> barrier_impl() override {
    return enqueue("barrier", [this](uint32_t tag) {
      gloo::BarrierOptions o(context_);
      o.setTag(tag);
      o.setTimeout(options_.timeout);
      gloo::barrier(o);
    });
  }

 private:
  std::shared_ptr<Work> enqueue(const char* op, std::function<void(uint32_t)> fn) {
    std::lock_guard<std::mutex> lock(seq_mu_);
    uint64_t seq = ++seq_;
    auto work = std::make_shared<Work>(describe(op, seq));
    collectives_->push(work, [fn = std::move(fn), seq] { fn(static_cast<uint32_t>(seq)); });
    return work;
  }

  void all_reduce_now(const Tensor& tensor, ReduceOp op, uint32_t tag) {
    visit_element_size(tensor.element_size(), [&](auto carrier) {
      using C = decltype(carrier);
      gloo::AllreduceOptions o(context_);
      o.setOutput(static_cast<C*>(tensor.data_ptr()), static_cast<size_t>(tensor.numel()));
      o.setReduceFunction(reduce_fn(tensor.dtype(), op));
      o.setTag(tag);
      o.setTimeout(options_.timeout);
      gloo::allreduce(o);
    });
    if (op == ReduceOp::AVG) tensor.div_(size_);
  }

  std::shared_ptr<Work> post_p2p(const char* op, const Tensor& tensor, int peer, int tag, bool is_send) {
    std::shared_ptr<gloo::transport::UnboundBuffer> buf;
    std::shared_ptr<Work> work;
    {
      std::lock_guard<std::mutex> lock(seq_mu_);
      work = std::make_shared<Work>(describe(op, ++p2p_seq_));
      buf = context_->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
      if (is_send) {
        buf->send(peer, static_cast<uint64_t>(tag));
      } else {
        buf->recv(peer, static_cast<uint64_t>(tag));
      }
    }
    p2p_->push(work, [buf, tensor, is_send, timeout = options_.timeout] {
      bool done = is_send ? buf->waitSend(timeout) : buf->waitRecv(timeout);
      EMBER_CHECK(done, "aborted");
    });
    return work;
  }

  std::shared_ptr<gloo::Context> context_;
  std::mutex seq_mu_;
  // Collectives' tags: every rank must count the same, so point-to-point ops (which ranks post
  // in different numbers) count apart.
  uint64_t seq_ = 0;
  uint64_t p2p_seq_ = 0;
  std::unique_ptr<TaskQueue> collectives_ = std::make_unique<TaskQueue>();
  std::unique_ptr<TaskQueue> p2p_ = std::make_unique<TaskQueue>();
};

}  // namespace

std::shared_ptr<ProcessGroup> make_process_group_gloo(std::shared_ptr<Store> store, int rank, int size,
                                                      ProcessGroupGlooOptions options) {
  return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, options);
}

}  // namespace ember::distributed
