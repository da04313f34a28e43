#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "test_util.h"

#include "ember/data/distributed_sampler.h"

namespace ember::testing {

using data::DistributedSampler;
using Indices = std::vector<int64_t>;

namespace {

std::vector<Indices> shares(int64_t n, int64_t replicas, bool shuffle, bool drop_last, int64_t epoch = 0,
                            uint64_t seed = 0) {
  std::vector<Indices> out;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    Indices idx = s.indices();
    EXPECT_EQ(static_cast<int64_t>(idx.size()), s.size()) << "rank " << r;
    out.push_back(idx);
  }
  return out;
}

}  // namespace

// The unshuffled shares are deterministic, so they match PyTorch exactly:
//   [list(DistributedSampler(range(n), nr, r, shuffle=False, drop_last=dl)) for r in range(nr)]
TEST(DistributedSampler, UnshuffledSharesMatchPyTorch) {
  struct Case {
    int64_t n, replicas;
    bool drop_last;
    std::vector<Indices> expected;
  };
  std::vector<Case> cases = {
      {10, 3, false, {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}},
      {10, 3, true, {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}},
      {10, 4, false, {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}},
      {10, 4, true, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
      {2, 4, false, {{0}, {1}, {0}, {1}}},
      {2, 4, true, {{}, {}, {}, {}}},
      {0, 3, false, {{}, {}, {}}},
      {12, 4, true, {{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}}},
      {1, 3, false, {{0}, {0}, {0}}},
  };
  for (const Case& c : cases)
    EXPECT_EQ(shares(c.n, c.replicas, false, c.drop_last), c.expected)
        << "n " << c.n << " replicas " << c.replicas << " drop_last " << c.drop_last;
}

// len(sampler) and total_size against PyTorch's formulas: ceil(n / r), or with drop_last and
// n % r != 0, ceil((n - r) / r).
TEST(DistributedSampler, SizesFollowPyTorchFormulas) {
  for (int64_t n : {0, 1, 5, 7, 16, 17, 100}) {
    for (int64_t r : {1, 2, 3, 4, 8}) {
      for (bool drop_last : {false, true}) {
        double expected =
            drop_last && n % r != 0 ? std::ceil(double(n - r) / double(r)) : std::ceil(double(n) / double(r));
        DistributedSampler s(n, r, r - 1, true, 0, drop_last);
        EXPECT_EQ(s.size(), static_cast<int64_t>(std::max(expected, 0.0)))
            << n << " " << r << " " << drop_last;
        EXPECT_EQ(s.total_size(), s.size() * r);
      }
    }
  }
}

// Shuffled: the union over ranks is the dataset (each index once, plus the padding repeats when
// padded; the dropped tail is never more than replicas - 1 indices), and the shares are disjoint.
TEST(DistributedSampler, ShuffledSharesCoverTheDataset) {
  for (bool drop_last : {false, true}) {
    for (int64_t n : {10, 12, 37}) {
      const int64_t replicas = 4;
      std::vector<Indices> sh = shares(n, replicas, true, drop_last, /*epoch=*/3, /*seed=*/11);
      std::map<int64_t, int> count;
      for (const Indices& s : sh)
        for (int64_t i : s) ++count[i];
      int64_t total = 0, padded = 0;
      for (auto [i, k] : count) {
        EXPECT_TRUE(i >= 0 && i < n) << i;
        total += k;
        padded += k - 1;
      }
      EXPECT_EQ(total, sh[0].size() * replicas);
      if (drop_last) {
        EXPECT_EQ(padded, 0);
        EXPECT_EQ(static_cast<int64_t>(count.size()), n / replicas * replicas);
      } else {
        EXPECT_EQ(static_cast<int64_t>(count.size()), n);  // every index reached
        EXPECT_EQ(padded, (replicas - n % replicas) % replicas);
      }
    }
  }
}

// Same seed and epoch: the same order on every rank (each rank's share is a slice of one
// permutation); another epoch or seed: another order; set_epoch back: the first order again.
TEST(DistributedSampler, EpochsAndSeeds) {
  const int64_t n = 64, replicas = 2;
  auto interleave = [&](const std::vector<Indices>& sh) {
    Indices all;
    for (size_t k = 0; k < sh[0].size(); ++k)
      for (const Indices& s : sh) all.push_back(s[k]);
    return all;
  };
  Indices e0 = interleave(shares(n, replicas, true, false, 0));
  Indices e1 = interleave(shares(n, replicas, true, false, 1));
  Indices s5 = interleave(shares(n, replicas, true, false, 0, 5));
  // Seed 0 + epoch 5 and seed 5 + epoch 0 give the same generator seed, as in PyTorch.
  EXPECT_EQ(interleave(shares(n, replicas, true, false, 5, 0)), s5);
  Indices sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  Indices iota(n);
  std::iota(iota.begin(), iota.end(), int64_t{0});
  EXPECT_EQ(sorted, iota);  // a permutation
  EXPECT_NE(e0, iota);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, s5);
  DistributedSampler s(n, replicas, 1);
  Indices first = s.indices();
  s.set_epoch(1);
  EXPECT_NE(s.indices(), first);
  EXPECT_EQ(s.epoch(), 1);
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), first);
  EXPECT_EQ(s.num_replicas(), 2);
  EXPECT_EQ(s.rank(), 1);
}

// Under a DataLoader each rank's loader yields its share in batches, and the loader's epochs
// reach the sampler (the order changes per epoch).
TEST(DistributedSampler, WithDataLoader) {
  const int64_t n = 10, replicas = 3;
  auto d = std::make_shared<data::TensorDataset>(arange(n));
  std::set<int64_t> seen;
  std::vector<Indices> epochs(2);
  for (int64_t r = 0; r < replicas; ++r) {
    auto sampler = std::make_shared<DistributedSampler>(n, replicas, r);
    data::DataLoader loader(d, data::DataLoaderOptions().batch_size(3), sampler);
    EXPECT_EQ(loader.size(), 2);  // 4 samples per rank: batches of 3 and 1
    for (int epoch = 0; epoch < 2; ++epoch) {
      Indices got;
      for (auto& batch : loader) {
        for (int64_t k = 0; k < batch[0].numel(); ++k) got.push_back(batch[0][k].item<int64_t>());
      }
      sampler->set_epoch(epoch);
      EXPECT_EQ(got, sampler->indices()) << "rank " << r << " epoch " << epoch;
      if (epoch == 0) seen.insert(got.begin(), got.end());
      epochs[epoch].insert(epochs[epoch].end(), got.begin(), got.end());
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
  EXPECT_NE(epochs[0], epochs[1]);
}

TEST(DistributedSampler, Errors) {
  EXPECT_EMBER_ERROR(DistributedSampler(10, 0, 0),
                     "DistributedSampler: num_replicas must be positive, got 0");
  EXPECT_EMBER_ERROR(DistributedSampler(10, 2, 2),
                     "DistributedSampler: invalid rank 2, rank should be in the interval [0, 1]");
  EXPECT_EMBER_ERROR(DistributedSampler(10, 2, -1), "DistributedSampler: invalid rank -1");
  EXPECT_EMBER_ERROR(DistributedSampler(-1, 2, 0),
                     "DistributedSampler: dataset_size must be non-negative, got -1");
}

}  // namespace ember::testing
