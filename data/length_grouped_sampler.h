#pragma once

#include <cstdint>
#include <vector>

#include "ember/data/sampler.h"

namespace ember::data {

// Hugging Face's LengthGroupedSampler: a random order in which neighbours have similar lengths,
// so that batches padded to their longest sample waste little. The shuffled indices are cut into
// mega-batches of mega_batch_mult * batch_size, each sorted by decreasing length; the longest
// sample's mega-batch goes first, so a too-long batch fails at the first step, not the last.
// Like RandomSampler, the order is a function of (seed, epoch).
class LengthGroupedSampler : public Sampler {
 public:
  LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size, uint64_t seed = 0,
                       int64_t mega_batch_mult = 50);
  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  std::vector<int64_t> indices() const override;
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }

 private:
  std::vector<int64_t> lengths_;
  int64_t mega_batch_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

}  // namespace ember::data
