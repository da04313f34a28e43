#include "ember/distributed/tensor_parallel_state.h"

#include <map>
#include <set>

#include "ember/core/grad_mode.h"
#include "ember/distributed/parallel_regions.h"

namespace ember::distributed {

namespace {

// Where a state_dict key lives: its group and dim when sharded.
struct Shard {
  std::shared_ptr<ProcessGroup> group;
  int64_t dim = -1;
};

// The sharded keys of `model`'s state_dict.
std::map<std::string, Shard> shards_of(nn::Module& model) {
  std::map<std::string, Shard> shards;
  model.apply([&](const std::string& prefix, nn::Module& m) {
    const auto* tp = dynamic_cast<const TensorParallelShards*>(&m);
    if (!tp) return;
    for (const auto& [name, param] : m.named_parameters(/*recurse=*/false))
      if (std::optional<int64_t> d = tp->shard_dim(name))
        shards[prefix.empty() ? name : prefix + "." + name] = {tp->shard_group(), *d};
  });
  return shards;
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
      const int64_t n = local.size(s.dim);
      EMBER_CHECK(whole->dim() == local.dim() && whole->size(s.dim) == n * s.group->size(), op, ": \"", key,
                  "\" of shape ", whole->sizes(), " does not split into ", s.group->size(),
                  " shards of shape ", local.sizes(), " along dim ", s.dim);
      part = whole->narrow(s.dim, s.group->rank() * n, n);
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
    full.insert(
        key, it == shards.end() ? local.clone() : all_gather_along(local, it->second.dim, it->second.group));
  }
  return full;
}

}  // namespace ember::distributed
