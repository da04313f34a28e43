#include "ember/distributed/reducer.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ember/autograd/engine.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/foreach.h"

namespace ember::distributed {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

CommWork compress_hook(ProcessGroup& group, GradBucket& bucket, ScalarType dtype) {
  // Divided before the sum, as PyTorch does, so that the half-precision sum does not overflow.
  Tensor compressed = bucket.buffer.to(dtype, /*non_blocking=*/false, /*copy=*/true).div_(group.size());
  std::shared_ptr<Work> work = group.all_reduce(compressed, ReduceOp::SUM);
  return {std::move(work), [buffer = bucket.buffer, compressed] { buffer.copy_(compressed); }};
}

// Whether `grad` is exactly `view` (the memory of a bucket, not a copy of it).
bool is_view(const Tensor& grad, const Tensor& view) {
  return grad.data_ptr() == view.data_ptr() && grad.strides().equals(view.strides());
}

void copy_lists(const std::vector<Tensor>& dsts, const std::vector<Tensor>& srcs) {
  if (!dsts.empty()) _foreach_copy_(dsts, srcs);
}

std::string quoted_names(const std::vector<size_t>& params, const std::vector<std::string>& names) {
  std::string s;
  for (size_t i : params) s += detail::str_cat(s.empty() ? "" : ", ", "'", names[i], "' (index ", i, ")");
  return s;
}

}  // namespace

namespace default_hooks {
CommWork allreduce_hook(ProcessGroup& group, GradBucket& bucket) {
  return {group.all_reduce(bucket.buffer, ReduceOp::AVG), nullptr};
}
CommWork fp16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kFloat16);
}
CommWork bf16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kBFloat16);
}
}  // namespace default_hooks

std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(
    const std::vector<Tensor>& tensors, const std::vector<int64_t>& bucket_size_limits) {
  EMBER_CHECK(!bucket_size_limits.empty(), "compute_bucket_assignment_by_size: no bucket size limits");
  struct Open {
    ScalarType dtype;
    Device device;
    std::vector<size_t> tensors;
    int64_t bytes = 0;
    size_t limit = 0;  // into bucket_size_limits
  };
  std::vector<Open> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    auto it = std::find_if(open.begin(), open.end(),
                           [&](const Open& o) { return o.dtype == t.dtype() && o.device == t.device(); });
    if (it == open.end()) it = open.insert(open.end(), Open{t.dtype(), t.device(), {}});
    it->tensors.push_back(i);
    it->bytes += static_cast<int64_t>(t.nbytes());
    if (it->bytes >= bucket_size_limits[std::min(it->limit, bucket_size_limits.size() - 1)]) {
      buckets.push_back(std::move(it->tensors));
      it->tensors.clear();
      it->bytes = 0;
      ++it->limit;
    }
  }
  for (Open& o : open)
    if (!o.tensors.empty()) buckets.push_back(std::move(o.tensors));
  std::sort(buckets.begin(), buckets.end(),
            [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return buckets;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 std::vector<std::vector<size_t>> buckets, std::shared_ptr<ProcessGroup> group,
                 bool find_unused_parameters, bool gradient_as_bucket_view)
    : params_(std::move(params)),
      names_(std::move(names)),
      bucket_of_(params_.size(), kNone),
      group_(std::move(group)),
      find_unused_(find_unused_parameters),
      grad_as_view_(gradient_as_bucket_view),
      hook_(default_hooks::allreduce_hook),
      ready_(params_.size(), 0),
      self_(std::make_shared<Reducer*>(this)) {
  EMBER_CHECK(group_, "Reducer: no process group");
  EMBER_CHECK(names_.size() == params_.size(), "Reducer: ", names_.size(), " names for ", params_.size(),
              " parameters");
  NoGradGuard no_grad;
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket bucket;
    std::vector<int64_t> offsets;
    int64_t size = 0;
    for (size_t p : buckets[b]) {
      EMBER_CHECK(p < params_.size() && bucket_of_[p] == kNone, "Reducer: parameter index ", p,
                  " is out of range or in two buckets");
      EMBER_CHECK(params_[p].dtype() == params_[buckets[b][0]].dtype() &&
                      params_[p].device() == params_[buckets[b][0]].device(),
                  "Reducer: bucket ", b, " mixes dtypes or devices");
      bucket_of_[p] = b;
      bucket.params.push_back(p);
      offsets.push_back(size);
      size += params_[p].numel();
    }
    EMBER_CHECK(!bucket.params.empty(), "Reducer: bucket ", b, " is empty");
    bucket.buffer = empty({size}, params_[bucket.params[0]].options());
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& p = params_[bucket.params[k]];
      // A dense parameter's view has its strides (a channels-last weight's gradient stays
      // channels-last, so the fused optimizers take it as it is), as in PyTorch's reducer.
      bucket.views.push_back(p.is_non_overlapping_and_dense()
                                 ? bucket.buffer.as_strided(p.sizes(), p.strides(), offsets[k])
                                 : bucket.buffer.narrow(0, offsets[k], p.numel()).view(p.sizes()));
    }
    bucket.pending = bucket.params.size();
    buckets_.push_back(std::move(bucket));
  }
  // Gradients that exist already move into their buckets; the others stay undefined (a parameter
  // unused everywhere keeps no gradient), as in PyTorch.
  if (grad_as_view_)
    for (Bucket& b : buckets_) copy_into_buffer(b);
  for (size_t p = 0; p < params_.size(); ++p) {
    EMBER_CHECK(bucket_of_[p] != kNone, "Reducer: parameter ", p, " ('", names_[p], "') is in no bucket");
    params_[p].register_post_accumulate_grad_hook([self = std::weak_ptr<Reducer*>(self_), p](const Tensor&) {
      if (auto r = self.lock()) (*r)->autograd_hook(p);
    });
  }
}

Reducer::~Reducer() = default;

void Reducer::register_comm_hook(CommHook hook) {
  EMBER_CHECK(hook, "DistributedDataParallel: register_comm_hook: the hook is empty");
  EMBER_CHECK(!in_backward_,
              "DistributedDataParallel: register_comm_hook: a backward pass is reducing gradients");
  hook_ = std::move(hook);
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> r;
  for (const Bucket& b : buckets_) r.push_back(b.params);
  return r;
}

void Reducer::prepare_for_backward(bool sync, const std::vector<Tensor>& outputs) {
  if (in_backward_) {
    // The last backward stopped before its end (it threw): settle what it started first.
    wait_launched();
    reset();
    EMBER_CHECK(false,
                "DistributedDataParallel: Expected to have finished reduction in the prior iteration before "
                "starting a new one; the last backward did not reach its end (it failed part way)");
  }
  reset();
  expect_hooks_ = sync;
  unused_.clear();
  if (!sync || !find_unused_) return;
  // The parameters whose gradient sinks the outputs' graph does not reach.
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const Tensor& t : outputs) {
    if (!t.defined() || !t.requires_grad()) continue;
    if (Edge e = gradient_edge(t); e.valid() && seen.insert(e.node.get()).second)
      stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges())
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  Tensor used = ones({static_cast<int64_t>(params_.size())}, kInt32);
  for (size_t p = 0; p < params_.size(); ++p) {
    if (seen.count(gradient_edge(params_[p]).node.get())) continue;
    unused_.push_back(p);
    used.data_ptr<int32_t>()[p] = 0;
  }
  used_ = used.to(params_[0].device());
}

void Reducer::autograd_hook(size_t param) {
  if (!expect_hooks_) return;  // no_sync, or a second backward over one forward
  if (!in_backward_) {
    in_backward_ = true;
    autograd::queue_callback([self = std::weak_ptr<Reducer*>(self_)] {
      if (auto r = self.lock()) (*r)->finalize_backward();
    });
    for (size_t p : unused_) mark_ready(p);
  }
  mark_ready(param);
}

void Reducer::mark_ready(size_t param) {
  EMBER_CHECK(!ready_[param], "DistributedDataParallel: parameter ", param, " ('", names_[param],
              "') was marked ready twice in one backward: its gradient was accumulated twice (a use outside "
              "the forward's outputs with find_unused_parameters, or two backward passes over one forward)");
  ready_[param] = 1;
  if (--buckets_[bucket_of_[param]].pending != 0) return;
  // Every rank starts the buckets in index order, whatever order they become ready in.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(next_bucket_++);
}

std::vector<size_t> Reducer::copy_into_buffer(Bucket& b) {
  std::vector<Tensor> dsts, srcs;
  std::vector<size_t> undefined;
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Tensor& p = params_[b.params[k]];
    Tensor g = p.grad();
    if (!g.defined()) {
      undefined.push_back(k);
    } else if (!grad_as_view_ || !is_view(g, b.views[k])) {
      dsts.push_back(b.views[k]);
      srcs.push_back(g);
      if (grad_as_view_) p.set_grad(b.views[k]);
    }
  }
  copy_lists(dsts, srcs);
  return undefined;
}

void Reducer::launch(size_t index) {
  NoGradGuard no_grad;
  Bucket& b = buckets_[index];
  // A parameter without a gradient (find_unused_parameters) adds zeros; one with a gradient adds
  // it, with what no_sync accumulated.
  for (size_t k : copy_into_buffer(b)) b.views[k].zero_();
  GradBucket grad_bucket{index, b.buffer, {}, index + 1 == buckets_.size()};
  for (size_t p : b.params) grad_bucket.parameters.push_back(params_[p]);
  b.work = hook_(*group_, grad_bucket);
  EMBER_CHECK(b.work.work, "DistributedDataParallel: the comm hook returned no Work for bucket ", index);
  if (grad_bucket.is_last && find_unused_) used_work_ = group_->all_reduce(used_, ReduceOp::SUM);
}

std::vector<size_t> Reducer::wait_launched() {
  for (size_t b = 0; b < next_bucket_; ++b) {
    CommWork& w = buckets_[b].work;
    w.work->wait();
    if (w.then) w.then();
  }
  std::vector<size_t> missing;
  for (size_t p = 0; p < params_.size(); ++p)
    if (!ready_[p]) missing.push_back(p);
  return missing;
}

void Reducer::finalize_backward() {
  std::vector<size_t> missing = wait_launched();
  if (!missing.empty()) {
    reset();
    EMBER_CHECK(false,
                "DistributedDataParallel: Expected to have finished reduction in the prior iteration before "
                "starting a new one: parameters ",
                quoted_names(missing, names_),
                " got no gradient in this backward, so their buckets were never reduced. The module has "
                "parameters that were not used in producing the loss: pass "
                "DistributedDataParallelOptions().find_unused_parameters(true), or make every parameter take "
                "part in the loss on every rank");
  }
  NoGradGuard no_grad;
  Tensor used;
  if (used_work_) {
    used_work_->wait();
    used = used_.cpu();  // a host sync, as in PyTorch: only with find_unused_parameters
  }
  std::vector<Tensor> dsts, srcs;
  for (Bucket& b : buckets_) {
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      if (Tensor g = p.grad(); g.defined()) {
        if (!grad_as_view_ || !is_view(g, b.views[k])) {
          dsts.push_back(g);
          srcs.push_back(b.views[k]);
        }
      } else if (used.defined() && used.data_ptr<int32_t>()[b.params[k]] > 0) {
        // Unused here, used on another rank; unused everywhere: stays undefined.
        p.set_grad(grad_as_view_ ? b.views[k] : b.views[k].clone());
      }
    }
  }
  copy_lists(dsts, srcs);
  reset();
}

void Reducer::reset() {
  expect_hooks_ = false;
  in_backward_ = false;
  std::fill(ready_.begin(), ready_.end(), 0);
  next_bucket_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work = {};
  }
  used_work_ = nullptr;
}

}  // namespace ember::distributed
