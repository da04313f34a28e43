#include "ember/distributed/distributed_sampler.h"

namespace ember::distributed {

std::shared_ptr<data::DistributedSampler> make_distributed_sampler(int64_t dataset_size, bool shuffle,
                                                                   uint64_t seed, bool drop_last,
                                                                   const GroupPtr& group) {
  return std::make_shared<data::DistributedSampler>(dataset_size, get_world_size(group), get_rank(group),
                                                    shuffle, seed, drop_last);
}

}  // namespace ember::distributed
