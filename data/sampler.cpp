#include "ember/data/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "ember/core/error.h"
#include "ember/core/generator.h"
#include "ember/core/random.h"

namespace ember::data {

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  EMBER_CHECK(size >= 0, "SequentialSampler: size must be non-negative, got ", size);
}

std::vector<int64_t> SequentialSampler::indices() const {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  EMBER_CHECK(size >= 0, "RandomSampler: size must be non-negative, got ", size);
}

std::vector<int64_t> RandomSampler::indices() const {
  // Philox stream `epoch` under key `seed`: each epoch's permutation is independent of the others
  // and of every other random op in the program.
  Generator gen(seed_);
  gen.set_state({seed_, static_cast<uint64_t>(epoch_)});
  Tensor perm = randperm(size_, kInt64, &gen);
  const int64_t* p = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + size_);
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples,
                                             bool replacement, uint64_t seed)
    : weights_(std::move(weights)), num_samples_(num_samples), replacement_(replacement), seed_(seed) {
  const char* who = "WeightedRandomSampler";
  EMBER_CHECK(num_samples > 0, who, ": num_samples must be positive, got ", num_samples);
  int64_t positive = 0;
  double total = 0;
  cumulative_.reserve(weights_.size());
  for (size_t i = 0; i < weights_.size(); ++i) {
    const double w = weights_[i];
    EMBER_CHECK(std::isfinite(w) && w >= 0, who, ": weights must be finite and non-negative, got ", w,
                " at index ", i);
    if (w > 0) ++positive, last_positive_ = static_cast<int64_t>(i);
    cumulative_.push_back(total += w);
  }
  EMBER_CHECK(positive > 0, who, ": the ", weights_.size(), " weights sum to 0");
  EMBER_CHECK(std::isfinite(total), who, ": the weights' sum overflows");
  EMBER_CHECK(replacement || num_samples <= positive, who, ": cannot draw ", num_samples,
              " samples without replacement from ", positive, " positive weights");
}

std::vector<int64_t> WeightedRandomSampler::indices() const {
  // Uniforms from Philox stream `epoch` under key `seed`, as RandomSampler's permutation.
  Generator gen(seed_);
  gen.set_state({seed_, static_cast<uint64_t>(epoch_)});
  const auto n = static_cast<int64_t>(cumulative_.size());
  const int64_t draws = replacement_ ? num_samples_ : n;
  Tensor u = rand({draws}, kFloat64, &gen);
  const double* pu = u.data_ptr<double>();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  if (replacement_) {
    // Inverse CDF: the first index whose running sum passes u * total, never a zero weight's (a
    // product rounded up to the total takes the last positive one).
    const double total = cumulative_.back();
    for (int64_t k = 0; k < num_samples_; ++k) {
      auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), pu[k] * total);
      out.push_back(it == cumulative_.end() ? last_positive_ : it - cumulative_.begin());
    }
    return out;
  }
  // Without replacement (Efraimidis and Spirakis): the num_samples largest keys log(u) / w, the same
  // distribution as drawing one index at a time and removing it; zero weights never come up.
  std::vector<std::pair<double, int64_t>> keys;
  for (int64_t i = 0; i < n; ++i)
    if (const double w = weights_[static_cast<size_t>(i)]; w > 0) keys.emplace_back(std::log(pu[i]) / w, i);
  std::partial_sort(keys.begin(), keys.begin() + num_samples_, keys.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t k = 0; k < num_samples_; ++k) out.push_back(keys[static_cast<size_t>(k)].second);
  return out;
}

BatchSampler::BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  EMBER_CHECK(sampler_, "BatchSampler: the sampler is null");
  EMBER_CHECK(batch_size >= 1, "BatchSampler: batch_size must be positive, got ", batch_size);
}

int64_t BatchSampler::size() const {
  int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<std::vector<int64_t>> BatchSampler::batches() const {
  std::vector<int64_t> idx = sampler_->indices();
  std::vector<std::vector<int64_t>> out;
  for (size_t start = 0; start < idx.size(); start += static_cast<size_t>(batch_size_)) {
    size_t end = std::min(idx.size(), start + static_cast<size_t>(batch_size_));
    if (drop_last_ && end - start < static_cast<size_t>(batch_size_)) break;
    out.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(start),
                     idx.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

}  // namespace ember::data
