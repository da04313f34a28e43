#include "ember/distributed/tensor_parallel_state.h"

#include <map>
#include <set>

#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/parallel_regions.h"

namespace ember::distributed {

namespace {

// A sharded state_dict key: its group and how it is split.
struct Shard {
  std::shared_ptr<ProcessGroup> group;
  ShardSpec spec;
};

// The sharded keys of `model`'s state_dict.
std::map<std::string, Shard> shards_of(nn::Module& model) {
  std::map<std::string, Shard> shards;
  model.apply([&](const std::string& prefix, nn::Module& m) {
    const auto* tp = dynamic_cast<const TensorParallelShards*>(&m);
    if (!tp) return;
    for (const auto& [name, param] : m.named_parameters(/*recurse=*/false))
      if (std::optional<ShardSpec> spec = tp->shard_spec(name))
        shards[prefix.empty() ? name : prefix + "." + name] = {tp->shard_group(), *spec};
  });
  return shards;
}

// Rank `rank`'s part of `whole`: its slice of `local_block` of each block, concatenated.
Tensor shard_of(const Tensor& whole, const ShardSpec& spec, int rank, int64_t local_block) {
  const int64_t block = whole.size(spec.dim) / spec.blocks;
  std::vector<Tensor> parts;
  for (int64_t b = 0; b < spec.blocks; ++b)
    parts.push_back(whole.narrow(spec.dim, b * block + rank * local_block, local_block));
  return cat(parts, spec.dim);
}

}  // namespace

void load_full_state_dict(nn::Module& model, const OrderedDict<Tensor>& full) {
  const char* op = "load_full_state_dict";
  const std::map<std::string, Shard> shards = shards_of(model);
  std::set<std::string> used;
  NoGradGuard no_grad;
  for (const auto& [key, local] : model.state_dict()) {
    const Tensor* whole = full.find(key);
    EMBER_CHECK(whole, op, ": missing key \"", key, "\"");
    Tensor part = *whole;
    if (auto it = shards.find(key); it != shards.end()) {
      const Shard& s = it->second;
      const int64_t d = s.spec.dim, n = local.size(d);
      EMBER_CHECK(whole->dim() == local.dim() && whole->size(d) == n * s.group->size(), op, ": \"", key,
                  "\" of shape ", whole->sizes(), " does not split into ", s.group->size(),
                  " shards of shape ", local.sizes(), " along dim ", d);
      part = shard_of(*whole, s.spec, s.group->rank(), n / s.spec.blocks);
    }
    EMBER_CHECK(part.sizes().equals(local.sizes()), op, ": \"", key, "\" has shape ", whole->sizes(),
                ", the model's is ", local.sizes());
    local.copy_(part);
    used.insert(key);
  }
  for (const auto& [key, value] : full)
    EMBER_CHECK(used.count(key), op, ": unexpected key \"", key,
                "\" (the model has no such parameter or buffer)");
}

OrderedDict<Tensor> full_state_dict(nn::Module& model) {
  const std::map<std::string, Shard> shards = shards_of(model);
  OrderedDict<Tensor> full;
  NoGradGuard no_grad;
  for (const auto& [key, local] : model.state_dict()) {
    auto it = shards.find(key);
    if (it == shards.end()) {
      full.insert(key, local.clone());
      continue;
    }
    // Every rank's shard side by side, then each block's slices in rank order.
    const ShardSpec& spec = it->second.spec;
    const int64_t world = it->second.group->size(), local_block = local.size(spec.dim) / spec.blocks;
    const Tensor all = all_gather_along(local, spec.dim, it->second.group);
    std::vector<Tensor> parts;
    for (int64_t b = 0; b < spec.blocks; ++b)
      for (int64_t r = 0; r < world; ++r)
        parts.push_back(all.narrow(spec.dim, (r * spec.blocks + b) * local_block, local_block));
    full.insert(key, cat(parts, spec.dim));
  }
  return full;
}

}  // namespace ember::distributed
