#include "ember/data/length_grouped_sampler.h"

#include <algorithm>

#include "ember/core/error.h"

namespace ember::data {

LengthGroupedSampler::LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size, uint64_t seed,
                                           int64_t mega_batch_mult)
    : lengths_(std::move(lengths)), mega_batch_(batch_size * mega_batch_mult), seed_(seed) {
  EMBER_CHECK(batch_size >= 1 && mega_batch_mult >= 1, "LengthGroupedSampler: batch_size (", batch_size,
              ") and mega_batch_mult (", mega_batch_mult, ") must be positive");
}

std::vector<int64_t> LengthGroupedSampler::indices() const {
  RandomSampler shuffle(size(), seed_);
  shuffle.set_epoch(epoch_);
  std::vector<int64_t> order = shuffle.indices();
  const auto longer = [&](int64_t a, int64_t b) { return lengths_[a] > lengths_[b]; };
  const size_t mb = static_cast<size_t>(mega_batch_);
  for (size_t start = 0; start < order.size(); start += mb)
    std::stable_sort(order.begin() + start, order.begin() + std::min(order.size(), start + mb), longer);
  if (!order.empty()) {
    // The mega-batch that holds the longest sample (at its head, being sorted) goes first.
    size_t first = 0;
    for (size_t start = 0; start < order.size(); start += mb)
      if (lengths_[order[start]] > lengths_[order[first]]) first = start;
    std::rotate(order.begin(), order.begin() + first, order.begin() + std::min(order.size(), first + mb));
  }
  return order;
}

}  // namespace ember::data
