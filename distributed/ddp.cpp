#include "ember/distributed/ddp.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// PyTorch's broadcast_bucket_size for module states.
constexpr int64_t kBroadcastBucketBytes = int64_t{250} << 20;

Tensor int64_tensor(std::vector<int64_t> values, Device device) {
  return from_blob(values.data(), {static_cast<int64_t>(values.size())}, kInt64).clone().to(device);
}

// Rank 0's tensors, broadcast in flat buffers of one dtype and device each (not one collective
// per tensor), copied into every other rank's tensors.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors) {
  if (group.size() == 1 || tensors.empty()) return;
  NoGradGuard no_grad;
  std::vector<std::vector<size_t>> buckets =
      compute_bucket_assignment_by_size(tensors, {kBroadcastBucketBytes});
  std::vector<Tensor> flats;
  std::vector<std::shared_ptr<Work>> works;
  for (const auto& bucket : buckets) {
    std::vector<Tensor> parts;
    for (size_t i : bucket) parts.push_back(tensors[i].reshape({-1}));
    flats.push_back(cat(parts));
    works.push_back(group.broadcast(flats.back(), 0));
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    works[b]->wait();
    if (group.rank() == 0) continue;
    int64_t offset = 0;
    for (size_t i : buckets[b]) {
      const Tensor& t = tensors[i];
      t.copy_(flats[b].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

struct ParamMeta {
  ScalarType dtype;
  std::vector<int64_t> sizes;
};

// [count, then per parameter: dtype, dim, sizes...]
std::vector<int64_t> encode(const std::vector<ParamMeta>& metas) {
  std::vector<int64_t> r{static_cast<int64_t>(metas.size())};
  for (const ParamMeta& m : metas) {
    r.push_back(static_cast<int64_t>(m.dtype));
    r.push_back(static_cast<int64_t>(m.sizes.size()));
    r.insert(r.end(), m.sizes.begin(), m.sizes.end());
  }
  return r;
}

std::vector<ParamMeta> decode(const int64_t* p) {
  std::vector<ParamMeta> r(static_cast<size_t>(*p++));
  for (ParamMeta& m : r) {
    m.dtype = static_cast<ScalarType>(*p++);
    int64_t dim = *p++;
    m.sizes.assign(p, p + dim);
    p += dim;
  }
  return r;
}

std::string describe(const ParamMeta& m) {
  return ember::detail::str_cat("shape ", IntArrayRef(m.sizes), " and dtype ", m.dtype);
}

// Every rank compares its parameters with rank 0's; all of them throw if one differs (so none
// goes on to a broadcast the others never join).
void verify_param_shapes(ProcessGroup& group, const OrderedDict<Tensor>& params, Device device) {
  if (group.size() == 1) return;
  std::vector<ParamMeta> mine;
  for (const auto& [name, p] : params) mine.push_back({p.dtype(), p.sizes().vec()});
  std::vector<int64_t> encoded = encode(mine);
  Tensor length = int64_tensor({static_cast<int64_t>(encoded.size())}, device);
  group.broadcast(length, 0)->wait();
  int64_t n0 = length.cpu().data_ptr<int64_t>()[0];
  Tensor theirs =
      group.rank() == 0 ? int64_tensor(encoded, device) : zeros({n0}, TensorOptions(kInt64).device(device));
  group.broadcast(theirs, 0)->wait();
  std::vector<ParamMeta> rank0 = decode(theirs.cpu().data_ptr<int64_t>());

  std::string problem;
  if (rank0.size() != mine.size()) {
    problem = ember::detail::str_cat("the module has ", mine.size(), " parameters on rank ", group.rank(),
                                     " but ", rank0.size(), " on rank 0");
  }
  for (size_t i = 0; problem.empty() && i < mine.size(); ++i) {
    if (mine[i].dtype == rank0[i].dtype && mine[i].sizes == rank0[i].sizes) continue;
    problem =
        ember::detail::str_cat("parameter ", i, " ('", params.items()[i].first, "') has ", describe(mine[i]),
                               " on rank ", group.rank(), " but ", describe(rank0[i]), " on rank 0");
  }
  Tensor flag = int64_tensor({problem.empty() ? 0 : group.rank() + 1}, device);
  group.all_reduce(flag, ReduceOp::MAX)->wait();
  int64_t bad = flag.cpu().data_ptr<int64_t>()[0];
  EMBER_CHECK(problem.empty(), "DistributedDataParallel: ", problem,
              " (every rank must build the same model)");
  EMBER_CHECK(bad == 0, "DistributedDataParallel: the parameters of rank ", bad - 1,
              " do not match rank 0's (its error says how)");
}

}  // namespace

NoSyncGuard::NoSyncGuard(DistributedDataParallelBase& ddp)
    : ddp_(ddp), prev_(ddp.require_backward_grad_sync_) {
  ddp_.require_backward_grad_sync_ = false;
}
NoSyncGuard::~NoSyncGuard() { ddp_.require_backward_grad_sync_ = prev_; }

DistributedDataParallelBase::DistributedDataParallelBase(std::shared_ptr<nn::Module> module,
                                                         std::shared_ptr<ProcessGroup> group,
                                                         DistributedDataParallelOptions options)
    : nn::Module("DistributedDataParallel"),
      wrapped_(std::move(module)),
      group_(group ? std::move(group) : default_group()),
      options_(options) {
  EMBER_CHECK(wrapped_, "DistributedDataParallel: the module is null");
  EMBER_CHECK(options_.bucket_cap_mb() > 0 && options_.first_bucket_cap_mb() > 0,
              "DistributedDataParallel: bucket sizes must be positive, got bucket_cap_mb ",
              options_.bucket_cap_mb(), " and first_bucket_cap_mb ", options_.first_bucket_cap_mb());
  register_module("module", wrapped_);

  OrderedDict<Tensor> named = wrapped_->named_parameters();
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (const auto& [name, p] : named) {
    if (!p.requires_grad()) continue;
    EMBER_CHECK(params.empty() || p.device() == params[0].device(),
                "DistributedDataParallel: the module's parameters must be on one device, got '", names[0],
                "' on ", params[0].device(), " and '", name, "' on ", p.device());
    params.push_back(p);
    names.push_back(name);
  }
  EMBER_CHECK(!params.empty(),
              "DistributedDataParallel: the module has no parameter that requires grad, so "
              "there is nothing to reduce (DistributedDataParallel is not needed)");

  verify_param_shapes(*group_, named, params[0].device());
  std::vector<Tensor> states = named.values();
  for (const Tensor& b : wrapped_->buffers()) states.push_back(b);
  broadcast_coalesced(*group_, states);

  // Buckets in reverse registration order: roughly the order backward produces gradients in.
  std::vector<Tensor> reversed(params.rbegin(), params.rend());
  std::vector<std::vector<size_t>> buckets = compute_bucket_assignment_by_size(
      reversed, {static_cast<int64_t>(options_.first_bucket_cap_mb() * kMiB),
                 static_cast<int64_t>(options_.bucket_cap_mb() * kMiB)});
  for (auto& bucket : buckets)
    for (size_t& i : bucket) i = params.size() - 1 - i;
  reducer_ = std::make_unique<Reducer>(std::move(params), std::move(names), std::move(buckets), group_,
                                       options_.find_unused_parameters(), options_.gradient_as_bucket_view());
}

bool DistributedDataParallelBase::will_sync() const {
  return require_backward_grad_sync_ && GradMode::is_enabled();
}

void DistributedDataParallelBase::pre_forward() {
  if (options_.broadcast_buffers() && will_sync()) broadcast_coalesced(*group_, wrapped_->buffers());
}

void DistributedDataParallelBase::post_forward(const std::vector<Tensor>& outputs) {
  bool sync = will_sync();
  EMBER_CHECK(
      !sync || !options_.find_unused_parameters() || !outputs.empty(),
      "DistributedDataParallel: find_unused_parameters searches the graph from the forward's outputs: "
      "forward must return a Tensor, a vector of them, or a pair or tuple of those");
  reducer_->prepare_for_backward(sync, outputs);
}

}  // namespace ember::distributed
