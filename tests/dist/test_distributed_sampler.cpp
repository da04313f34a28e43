// DistributedSampler in real processes: make_distributed_sampler reads the group, and the ranks'
// shares (all-gathered) are slices of one permutation that covers the dataset, per epoch.
#include <algorithm>

#include "dist_test_util.h"

#include "ember/distributed/distributed_sampler.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

DIST_WORKER(distributed_sampler) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  const int64_t n = 23;
  auto sampler = d::make_distributed_sampler(n, /*shuffle=*/true, /*seed=*/5);
  EMBER_CHECK(sampler->rank() == rank && sampler->num_replicas() == size, "make_distributed_sampler: rank ",
              sampler->rank(), " of ", sampler->num_replicas());
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    sampler->set_epoch(epoch);
    std::vector<int64_t> mine = sampler->indices();
    Tensor all = empty({size, sampler->size()}, kInt64);
    d::all_gather_into_tensor(all, tensor(mine).to(kInt64));
    // Position k of rank r's share is element k * size + r of the padded permutation.
    std::vector<int64_t> perm(static_cast<size_t>(all.numel()));
    Tensor t = all.t().contiguous();
    std::copy(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel(), perm.begin());
    std::vector<int64_t> head(perm.begin(), perm.begin() + n), sorted = head;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i)
      EMBER_CHECK(sorted[i] == i, "the shares do not cover the dataset once (epoch ", epoch, ")");
    for (size_t i = n; i < perm.size(); ++i)  // the padding repeats from the start
      EMBER_CHECK(perm[i] == perm[i - n], "padding at ", i);
    epochs.push_back(head);
  }
  EMBER_CHECK(epochs[0] != epochs[1], "two epochs gave the same order");
  d::destroy_process_group();
}

TEST(DistributedSamplerDist, SharesCoverTheDatasetWorld3) { run_workers("distributed_sampler", 3); }

}  // namespace
}  // namespace ember::testing::dist
