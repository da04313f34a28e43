#pragma once

#include <cstdint>
#include <vector>

#include "ember/data/sampler.h"

namespace ember::data {

// Each of num_replicas processes takes its own share of a dataset's indices
// (torch.utils.data.distributed.DistributedSampler): the indices (a permutation drawn from
// seed + epoch when shuffling, else 0..size-1) are padded by repeating them from the start until
// num_replicas divides them (or, with drop_last, cut to the largest multiple), and rank takes
// every num_replicas-th from position rank. Every rank builds the same list, so the shares are
// disjoint (up to the padding) and cover the dataset. Call set_epoch before each epoch for a new
// order (the DataLoader does). distributed::make_distributed_sampler reads the rank and the
// world size from a process group.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  int64_t size() const override { return num_samples_; }  // this rank's indices per epoch
  std::vector<int64_t> indices() const override;
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace ember::data
