#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ember::data {

// The order in which an epoch visits dataset indices (torch.utils.data.Sampler). indices() is a
// function of the sampler's settings and its epoch only, so a run is reproducible and resumable;
// a distributed sampler gives each rank its share through the same interface.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;  // the number of indices per epoch
  virtual std::vector<int64_t> indices() const = 0;
  // Samplers whose order changes between epochs use it; the DataLoader sets it before each epoch.
  virtual void set_epoch(int64_t epoch) { (void)epoch; }
};

// 0, 1, ..., size - 1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices() const override;

 private:
  int64_t size_;
};

// A permutation of 0..size-1 drawn from (seed, epoch): the same for the same pair, a new one
// each epoch.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size, uint64_t seed = 0);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices() const override;
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

 private:
  int64_t size_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

// num_samples indices drawn with probability proportional to `weights` (non-negative, finite,
// not all 0), with replacement or without (then each index at most once, num_samples at most the
// count of positive weights), as torch.utils.data.WeightedRandomSampler. Like RandomSampler, the
// draw is a function of (seed, epoch).
class WeightedRandomSampler : public Sampler {
 public:
  WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, bool replacement = true,
                        uint64_t seed = 0);
  int64_t size() const override { return num_samples_; }
  std::vector<int64_t> indices() const override;
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }

 private:
  std::vector<double> weights_, cumulative_;  // and their running sums
  int64_t last_positive_ = 0;                 // the last index of a positive weight
  int64_t num_samples_;
  bool replacement_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

// Groups a sampler's indices into batches of batch_size; the last one is smaller unless
// drop_last drops it (torch.utils.data.BatchSampler).
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last);
  int64_t size() const;  // the number of batches per epoch
  std::vector<std::vector<int64_t>> batches() const;
  void set_epoch(int64_t epoch) { sampler_->set_epoch(epoch); }
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }

 private:
  std::shared_ptr<Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace ember::data
