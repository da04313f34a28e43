#include "ember/data/distributed_sampler.h"

#include <numeric>

#include "ember/core/error.h"
#include "ember/core/generator.h"
#include "ember/core/random.h"

namespace ember::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  EMBER_CHECK(dataset_size >= 0, "DistributedSampler: dataset_size must be non-negative, got ", dataset_size);
  EMBER_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be positive, got ", num_replicas);
  EMBER_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: invalid rank ", rank,
              ", rank should be in the interval [0, ", num_replicas - 1, "]");
  // PyTorch's counts: with drop_last the tail that does not divide evenly is dropped, else padded.
  // (ceil((size - num_replicas) / num_replicas) there is size / num_replicas here.)
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  if (shuffle_) {
    // Seeded with seed + epoch as in PyTorch: the same permutation on every rank.
    Generator gen(seed_ + static_cast<uint64_t>(epoch_));
    Tensor perm = randperm(dataset_size_, kInt64, &gen);
    const int64_t* p = perm.data_ptr<int64_t>();
    all.assign(p, p + dataset_size_);
  } else {
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  // Position i of the padded list is all[i % size]: the padding repeats from the start.
  for (int64_t i = rank_; i < total_size(); i += num_replicas_)
    out.push_back(all[static_cast<size_t>(i % dataset_size_)]);
  return out;
}

}  // namespace ember::data
