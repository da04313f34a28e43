#include "ember/distributed/zero_redundancy_optimizer.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/serialize.h"
#include "ember/distributed/distributed.h"
#include "ember/nn/flatten_parameters.h"
#include "ember/optim/state_text.h"

namespace ember::distributed {
namespace {

using IndexMap = std::function<std::optional<size_t>(size_t)>;

// "state.<i>.<rest>" -> (i, rest); nullopt for other keys.
std::optional<std::pair<size_t, std::string>> state_key(const std::string& key) {
  size_t i = 0;
  int end = 0;
  if (std::sscanf(key.c_str(), "state.%zu.%n", &i, &end) != 1 || end == 0) return std::nullopt;
  return std::make_pair(i, key.substr(static_cast<size_t>(end)));
}

// `sd` with its state entries "state.<i>.*" moved to index(i) (dropped where that is nullopt) and
// each group's "param_groups.<g>.params" listing group_sizes[g] indices, numbered on from group to
// group: how a local optimizer's state dict and the full one map onto each other.
StateDict renumbered(const StateDict& sd, const std::vector<size_t>& group_sizes, const IndexMap& index) {
  auto key_of = [&](const std::string& key) -> std::optional<std::string> {
    auto parsed = state_key(key);
    if (!parsed) return key;
    std::optional<size_t> i = index(parsed->first);
    if (!i) return std::nullopt;
    return "state." + std::to_string(*i) + "." + parsed->second;
  };
  StateDict out;
  for (const auto& [key, value] : sd.metadata)
    if (auto k = key_of(key)) out.metadata[*k] = value;
  for (const auto& [key, t] : sd.tensors)
    if (auto k = key_of(key)) out.tensors.insert(*k, t);
  size_t next = 0;
  for (size_t g = 0; g < group_sizes.size(); ++g) {
    std::string ids;
    for (size_t k = 0; k < group_sizes[g]; ++k) {
      if (k) ids += ',';
      ids += std::to_string(next++);
    }
    out.metadata["param_groups." + std::to_string(g) + ".params"] = ids;
  }
  return out;
}

// A state dict travels as its safetensors bytes: their length, then the bytes.
void send_state_dict(ProcessGroup& group, const StateDict& sd, int dst, Device device) {
  std::vector<uint8_t> bytes = save_to_buffer(sd.tensors, sd.metadata);
  int64_t length = static_cast<int64_t>(bytes.size());
  group.send(from_blob(&length, {1}, kInt64).to(device), dst)->wait();
  group.send(from_blob(bytes.data(), {length}, kUInt8).to(device), dst)->wait();
}

StateDict recv_state_dict(ProcessGroup& group, int src, Device device) {
  Tensor length = zeros({1}, TensorOptions(kInt64).device(device));
  group.recv(length, src)->wait();
  Tensor bytes = empty({length.cpu().data_ptr<int64_t>()[0]}, TensorOptions(kUInt8).device(device));
  group.recv(bytes, src)->wait();
  bytes = bytes.cpu();
  return load_from_buffer(bytes.data_ptr<uint8_t>(), bytes.nbytes());
}

}  // namespace

std::vector<int> partition_parameters(const std::vector<optim::OptimizerParamGroup>& groups, int world_size) {
  EMBER_CHECK(world_size > 0, "partition_parameters: world_size must be positive, got ", world_size);
  std::vector<int> owner;
  std::vector<int64_t> sizes(static_cast<size_t>(world_size), 0);
  for (const optim::OptimizerParamGroup& g : groups) {
    const std::vector<Tensor>& params = g.params();
    std::vector<size_t> order(params.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
    size_t base = owner.size();
    owner.resize(base + params.size());
    for (size_t i : order) {
      auto smallest = std::min_element(sizes.begin(), sizes.end());
      owner[base + i] = static_cast<int>(smallest - sizes.begin());
      *smallest += params[i].numel();
    }
  }
  return owner;
}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params,
                                                 const OptimizerFactory& make_optimizer,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const ZeroOptions& options)
    : ZeroRedundancyOptimizer(
          std::vector<optim::OptimizerParamGroup>{optim::OptimizerParamGroup(std::move(params))},
          make_optimizer, std::move(group), options) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<optim::OptimizerParamGroup> groups,
                                                 const OptimizerFactory& make_optimizer,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const ZeroOptions& options)
    : group_(group ? std::move(group) : default_group()) {
  EMBER_CHECK(make_optimizer, "ZeroRedundancyOptimizer: the optimizer factory is empty");
  EMBER_CHECK(options.stage() == 1 || options.stage() == 2,
              "ZeroRedundancyOptimizer: stage must be 1 or 2, got ", options.stage());
  EMBER_CHECK(options.bucket_cap_mb() > 0, "ZeroRedundancyOptimizer: bucket_cap_mb must be positive, got ",
              options.bucket_cap_mb());
  // Checked here for every parameter, not only by the owner's optimizer, so that all ranks fail alike.
  std::set<const TensorImpl*> seen;
  for (const optim::OptimizerParamGroup& g : groups) {
    group_sizes_.push_back(g.params().size());
    for (const Tensor& p : g.params()) {
      size_t i = params_.size();
      EMBER_CHECK(p.defined() && p.is_leaf(), "ZeroRedundancyOptimizer: parameter ", i,
                  " is undefined or not a leaf tensor");
      EMBER_CHECK(seen.insert(p.unsafe_impl()).second, "ZeroRedundancyOptimizer: parameter ", i,
                  " is given twice");
      EMBER_CHECK(i == 0 || p.device() == params_[0].device(),
                  "ZeroRedundancyOptimizer: the parameters must be on one device, got parameter 0 on ",
                  params_[0].device(), " and parameter ", i, " on ", p.device());
      params_.push_back(p);
    }
  }
  EMBER_CHECK(!params_.empty(), "ZeroRedundancyOptimizer: got an empty parameter list");
  const std::string backend = group_->backend_name();
  const Tensor& p0 = params_[0];
  EMBER_CHECK(backend == "gloo" ? p0.is_cpu() : backend != "nccl" || p0.is_cuda(),
              "ZeroRedundancyOptimizer: the parameters are on ", p0.device(),
              ", but the process group's backend (", backend, ") takes ", backend == "gloo" ? "CPU" : "CUDA",
              " tensors");

  param_to_rank_ = partition_parameters(groups, group_->size());
  // The local optimizer of an empty share could not be built (an optimizer of nothing is an error).
  for (int r = 0; r < group_->size(); ++r)
    EMBER_CHECK(!owned_by(r).empty(), "ZeroRedundancyOptimizer: rank ", r, " of ", group_->size(),
                " would own no parameter (there are ", params_.size(), "); use fewer ranks");
  size_t i = 0;
  for (optim::OptimizerParamGroup& g : groups) {
    std::vector<Tensor> mine;
    for (const Tensor& p : g.params())
      if (param_to_rank_[i++] == group_->rank()) mine.push_back(p);
    g.params() = std::move(mine);
  }
  if (options.parameters_as_bucket_view())
    for (int r = 0; r < group_->size(); ++r) {
      std::vector<Tensor> mine;
      for (size_t k : owned_by(r)) mine.push_back(params_[k]);
      rank_buffers_.push_back(nn::utils::flatten_parameters_(mine));
    }
  local_ = make_optimizer(std::move(groups));
  EMBER_CHECK(local_, "ZeroRedundancyOptimizer: the optimizer factory returned null");
  if (options.stage() == 2)
    sharded_ = std::make_unique<detail::ShardedGradients>(
        params_, param_to_rank_, group_, static_cast<int64_t>(options.bucket_cap_mb() * 1024 * 1024));
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

std::vector<size_t> ZeroRedundancyOptimizer::owned_by(int r) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (param_to_rank_[i] == r) out.push_back(i);
  return out;
}

Tensor ZeroRedundancyOptimizer::step(const optim::Optimizer::LossClosure& closure) {
  consolidated_.reset();
  optim::Optimizer::LossClosure run = closure;
  if (sharded_) {
    sharded_->finish();
    // A closure's backward reduces too: finished before the local step reads the gradients.
    if (closure)
      run = [&] {
        Tensor l = closure();
        sharded_->finish();
        return l;
      };
  }
  Tensor loss = local_->step(run);
  broadcast_params();
  return loss;
}

void ZeroRedundancyOptimizer::step(ShardedGradScaler& scaler) {
  consolidated_.reset();
  if (sharded_) sharded_->finish();
  scaler.step(*local_);
  broadcast_params();
}

void ZeroRedundancyOptimizer::broadcast_params() {
  if (group_->size() == 1) return;
  NoGradGuard no_grad;
  if (!rank_buffers_.empty()) {
    std::vector<std::shared_ptr<Work>> works;
    for (int r = 0; r < group_->size(); ++r)
      for (const Tensor& buffer : rank_buffers_[static_cast<size_t>(r)])
        works.push_back(group_->broadcast(buffer, r));
    for (const auto& w : works) w->wait();
    return;
  }
  // PyTorch's default (no parameters_as_bucket_view): a broadcast per parameter, all in flight at
  // once, straight into the parameter unless it is not contiguous.
  std::vector<Tensor> buffers;
  std::vector<std::shared_ptr<Work>> works;
  for (size_t i = 0; i < params_.size(); ++i) {
    buffers.push_back(params_[i].is_contiguous() ? params_[i] : params_[i].contiguous());
    works.push_back(group_->broadcast(buffers.back(), param_to_rank_[i]));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    works[i]->wait();
    if (!buffers[i].is_same(params_[i])) params_[i].copy_(buffers[i]);
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  if (sharded_) sharded_->finish();  // no reduce may still be writing into a gradient
  NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      p.set_grad(Tensor());
    else
      g.detach_().zero_();  // a gradient built with create_graph keeps no history
  }
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  const int world = group_->size(), rank = group_->rank();
  EMBER_CHECK(to >= 0 && to < world, "ZeroRedundancyOptimizer.consolidate_state_dict: to is ", to,
              ", not a rank of the group (size ", world, ")");
  consolidated_.reset();
  StateDict local = local_->state_dict();
  const Device device = params_[0].device();
  if (rank != to) {
    send_state_dict(*group_, local, to, device);
    return;
  }
  StateDict full;
  std::vector<OrderedDict<Tensor>::Item> tensors;
  for (int r = 0; r < world; ++r) {
    std::vector<size_t> owned = owned_by(r);
    StateDict part = renumbered(r == rank ? local : recv_state_dict(*group_, r, device), group_sizes_,
                                [&](size_t l) { return std::optional<size_t>(owned.at(l)); });
    // The options (the same on every rank) come from this rank's optimizer.
    for (const auto& [key, value] : part.metadata)
      if (r == rank || state_key(key)) full.metadata[key] = value;
    tensors.insert(tensors.end(), part.tensors.items().begin(), part.tensors.items().end());
  }
  // In parameter order, as a single-process optimizer's state dict.
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return state_key(a.first)->first < state_key(b.first)->first;
  });
  for (auto& [key, t] : tensors) full.tensors.insert(key, t);
  consolidated_ = std::move(full);
}

StateDict ZeroRedundancyOptimizer::state_dict() const {
  EMBER_CHECK(consolidated_,
              "ZeroRedundancyOptimizer.state_dict: the state is not consolidated on this rank (",
              group_->rank(), "); call consolidate_state_dict(to=", group_->rank(),
              ") on every rank first, again after each step");
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& sd) {
  const std::string who = "ZeroRedundancyOptimizer.load_state_dict";
  auto meta = [&](const std::string& key) { return optim::detail::metadata_at(sd.metadata, who, key); };
  size_t groups = static_cast<size_t>(optim::detail::parse_number(who, "param_groups", meta("param_groups")));
  EMBER_CHECK(groups == group_sizes_.size(), who, ": the state dict has ", groups,
              " parameter groups, the optimizer has ", group_sizes_.size());
  for (size_t g = 0; g < groups; ++g) {
    size_t saved = optim::detail::split(meta("param_groups." + std::to_string(g) + ".params"), ',').size();
    EMBER_CHECK(saved == group_sizes_[g], who, ": parameter group ", g, " has ", saved,
                " parameters in the state dict, ", group_sizes_[g], " in the optimizer");
  }

  std::vector<std::optional<size_t>> local_index(params_.size());
  std::vector<size_t> owned = owned_by(group_->rank());
  for (size_t l = 0; l < owned.size(); ++l) local_index[owned[l]] = l;
  std::vector<size_t> local_sizes;
  for (const optim::OptimizerParamGroup& g : local_->param_groups()) local_sizes.push_back(g.params().size());
  // The local optimizer checks the rest (its class, options, buffers, shapes).
  local_->load_state_dict(renumbered(sd, local_sizes, [&](size_t i) {
    EMBER_CHECK(i < params_.size(), who, ": the state dict has state for parameter ", i,
                ", the optimizer has ", params_.size(), " parameters");
    return local_index[i];
  }));
  consolidated_.reset();
}

}  // namespace ember::distributed
