#pragma once

#include <cstdint>
#include <memory>

#include "ember/data/distributed_sampler.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {

// A DistributedSampler for this process: num_replicas and rank are `group`'s size and this
// process's rank in it (null: the default group), as PyTorch's DistributedSampler defaults.
std::shared_ptr<data::DistributedSampler> make_distributed_sampler(int64_t dataset_size, bool shuffle = true,
                                                                   uint64_t seed = 0, bool drop_last = false,
                                                                   const GroupPtr& group = nullptr);

}  // namespace ember::distributed
