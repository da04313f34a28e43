#include "ember/data/sampler.h"

#include <numeric>

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
