#include <set>

#include "test_util.h"

namespace ember::testing {

using data::Example;

namespace {

// The Philox permutations below come from an independent Python model of ember's randperm
// (Philox4x32-10 as in core/philox.h, 64-bit keys mod 2^53, Fisher-Yates from the end):
//   def randperm(n, seed, offset):
//       keys = [bits64(block(seed, offset, i // 2), i % 2) % 2**53 for i in range(n)]
//       p = list(range(n))
//       for i in range(n - 1, 0, -1): j = keys[i] % (i + 1); p[i], p[j] = p[j], p[i]
//       return p
const std::vector<int64_t> kPermSeed0Epoch0 = {6, 9, 8, 3, 1, 0, 7, 4, 5, 2};
const std::vector<int64_t> kPermSeed0Epoch1 = {4, 9, 7, 0, 5, 2, 8, 6, 1, 3};
const std::vector<int64_t> kPermSeed7Epoch0 = {5, 8, 3, 2, 0, 9, 6, 7, 4, 1};
const std::vector<int64_t> kPermSeed42Epoch0 = {8, 5, 4, 3, 0, 1, 2, 9, 6, 7};

std::vector<int64_t> first_fields(const data::Dataset& d) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < d.size(); ++i) out.push_back(d.get(i)[0].item<int64_t>());
  return out;
}

}  // namespace

TEST(TensorDataset, IndexesTheFirstDimOfEachTensor) {
  Tensor x = arange(12, kFloat32).view({4, 3});
  Tensor y = tensor({10, 11, 12, 13});
  data::TensorDataset d(x, y);
  EXPECT_EQ(d.size(), 4);
  Example e = d.get(2);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_CLOSE(e[0], tensor({6.0f, 7.0f, 8.0f}));
  EXPECT_EQ(e[1].dim(), 0);
  EXPECT_EQ(e[1].item<int64_t>(), 12);
  EXPECT_EQ(e[0].data_ptr(), x[2].data_ptr());  // a view, no copy
  EXPECT_EQ(d.get(-1)[1].item<int64_t>(), 13);  // Python's negative indices
  data::TensorDataset one(std::vector<Tensor>{x});
  EXPECT_EQ(one.get(0).size(), 1u);
}

TEST(TensorDataset, RejectsMismatchedAndBadInput) {
  EXPECT_EMBER_ERROR(data::TensorDataset(zeros({4, 3}), zeros({5})), "TensorDataset: size mismatch",
                     "tensor 0 is [4, 3] but tensor 1 is [5]");
  EXPECT_EMBER_ERROR(data::TensorDataset(zeros({4}), zeros({})), "TensorDataset: tensor 1 is 0-dim");
  EXPECT_EMBER_ERROR(data::TensorDataset(std::vector<Tensor>{}), "TensorDataset: needs at least one tensor");
  EXPECT_EMBER_ERROR(data::TensorDataset(zeros({2}), Tensor()), "TensorDataset: tensor 1 is undefined");
  data::TensorDataset d(zeros({4}));
  EXPECT_EMBER_ERROR(d.get(4), "TensorDataset: index 4 is out of range for a dataset of size 4");
  EXPECT_EMBER_ERROR(d.get(-5), "TensorDataset: index -5 is out of range");
}

TEST(Subset, MapsIndicesAndChecksThem) {
  auto base = std::make_shared<data::TensorDataset>(arange(10));
  data::Subset s(base, {7, 2, 2});
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(first_fields(s), (std::vector<int64_t>{7, 2, 2}));
  EXPECT_EQ(s.get(-3)[0].item<int64_t>(), 7);
  EXPECT_EMBER_ERROR(s.get(3), "Subset: index 3 is out of range for a dataset of size 3");
  EXPECT_EMBER_ERROR(data::Subset(base, {1, 10}),
                     "Subset: indices[1] = 10 is out of range for a dataset of size 10");
  EXPECT_EMBER_ERROR(data::Subset(nullptr, {}), "Subset: the dataset is null");
}

TEST(ConcatDataset, ChainsTheDatasetsInOrder) {
  auto a = std::make_shared<data::TensorDataset>(arange(3));
  auto empty = std::make_shared<data::TensorDataset>(arange(0));
  auto b = std::make_shared<data::TensorDataset>(arange(10, 12));
  data::ConcatDataset c({a, empty, b});
  EXPECT_EQ(c.size(), 5);
  EXPECT_EQ(c.cumulative_sizes(), (std::vector<int64_t>{0, 3, 3, 5}));
  EXPECT_EQ(first_fields(c), (std::vector<int64_t>{0, 1, 2, 10, 11}));
  EXPECT_EQ(c.get(-1)[0].item<int64_t>(), 11);
  EXPECT_EMBER_ERROR(c.get(5), "ConcatDataset: index 5 is out of range for a dataset of size 5");
  EXPECT_EMBER_ERROR(data::ConcatDataset({}), "ConcatDataset: no datasets given");
  EXPECT_EMBER_ERROR(data::ConcatDataset({a, nullptr}), "ConcatDataset: datasets[1] is null");
}

TEST(RandomSplit, SplitsAlongASeededPermutation) {
  auto base = std::make_shared<data::TensorDataset>(arange(10));
  std::vector<data::Subset> parts = data::random_split(base, {7, 3}, 42);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].indices(),
            std::vector<int64_t>(kPermSeed42Epoch0.begin(), kPermSeed42Epoch0.begin() + 7));
  EXPECT_EQ(parts[1].indices(), std::vector<int64_t>(kPermSeed42Epoch0.begin() + 7, kPermSeed42Epoch0.end()));
  EXPECT_EQ(first_fields(parts[1]), (std::vector<int64_t>{9, 6, 7}));
  // Same seed, same split; empty parts are fine.
  EXPECT_EQ(data::random_split(base, {7, 3}, 42)[0].indices(), parts[0].indices());
  EXPECT_EQ(data::random_split(base, {0, 10, 0}, 1)[2].size(), 0);
  EXPECT_EMBER_ERROR(data::random_split(base, {5, 4}),
                     "random_split: the lengths add up to 9, but the dataset has size 10");
  EXPECT_EMBER_ERROR(data::random_split(base, {11, -1}), "random_split: lengths[1] = -1 is negative");
}

TEST(Sampler, SequentialAndRandomOrders) {
  EXPECT_EQ(data::SequentialSampler(4).indices(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(data::SequentialSampler(0).indices().empty());
  data::RandomSampler r(10, 0);
  EXPECT_EQ(r.size(), 10);
  EXPECT_EQ(r.indices(), kPermSeed0Epoch0);
  EXPECT_EQ(r.indices(), kPermSeed0Epoch0);  // a function of (seed, epoch) only
  r.set_epoch(1);
  EXPECT_EQ(r.indices(), kPermSeed0Epoch1);
  r.set_epoch(0);
  EXPECT_EQ(r.indices(), kPermSeed0Epoch0);
  EXPECT_EQ(data::RandomSampler(10, 7).indices(), kPermSeed7Epoch0);
  // Drawing from the global generator in between changes nothing.
  manual_seed(5);
  randn({100});
  EXPECT_EQ(data::RandomSampler(10, 0).indices(), kPermSeed0Epoch0);
  // A large one is a permutation.
  std::vector<int64_t> big = data::RandomSampler(1000, 3).indices();
  EXPECT_EQ(std::set<int64_t>(big.begin(), big.end()).size(), 1000u);
  EXPECT_EQ(*std::max_element(big.begin(), big.end()), 999);
  EXPECT_EMBER_ERROR(data::RandomSampler(-1), "RandomSampler: size must be non-negative, got -1");
  EXPECT_EMBER_ERROR(data::SequentialSampler(-2), "SequentialSampler: size must be non-negative, got -2");
}

TEST(Sampler, BatchSamplerCountsAndDropsTheLastBatch) {
  auto seq = std::make_shared<data::SequentialSampler>(10);
  data::BatchSampler keep(seq, 4, false), drop(seq, 4, true);
  EXPECT_EQ(keep.size(), 3);
  EXPECT_EQ(drop.size(), 2);
  EXPECT_EQ(keep.batches(), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(drop.batches(), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // The epoch reaches the sampler.
  auto rnd = std::make_shared<data::RandomSampler>(10, 0);
  data::BatchSampler b(rnd, 5, false);
  b.set_epoch(1);
  EXPECT_EQ(b.batches()[1], std::vector<int64_t>(kPermSeed0Epoch1.begin() + 5, kPermSeed0Epoch1.end()));
  EXPECT_EMBER_ERROR(data::BatchSampler(seq, 0, false), "BatchSampler: batch_size must be positive, got 0");
  EXPECT_EMBER_ERROR(data::BatchSampler(nullptr, 2, false), "BatchSampler: the sampler is null");
}

TEST(DefaultCollate, StacksEachField) {
  std::vector<Example> ex = {
      {tensor({1.0f, 2.0f}), tensor(int64_t(3)), tensor(7, kInt32), tensor({true}), tensor(200, kUInt8)},
      {tensor({4.0f, 5.0f}), tensor(int64_t(6)), tensor(-1, kInt32), tensor({false}), tensor(9, kUInt8)},
  };
  Example b = data::default_collate(ex);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_CLOSE(b[0], tensor({{1.0f, 2.0f}, {4.0f, 5.0f}}));
  EXPECT_CLOSE(b[1], tensor({3, 6}));
  EXPECT_CLOSE(b[2], tensor({7, -1}));  // int32 labels come out int64
  EXPECT_EQ(b[2].dtype(), kInt64);
  EXPECT_CLOSE(b[3], tensor({{true}, {false}}));
  EXPECT_CLOSE(b[4], tensor({200, 9}, kUInt8));
}

TEST(DefaultCollate, RejectsFieldsThatDoNotStack) {
  EXPECT_EMBER_ERROR(data::default_collate({}), "default_collate: got no examples");
  EXPECT_EMBER_ERROR(data::default_collate({{zeros({2}), zeros({})}, {zeros({2})}}),
                     "default_collate: example 1 has 1 fields, example 0 has 2");
  EXPECT_EMBER_ERROR(
      data::default_collate({{zeros({2})}, {zeros({2})}, {zeros({3})}}),
      "default_collate: field 0 of example 2 is float32 [3], but in example 0 it is float32 [2]");
  EXPECT_EMBER_ERROR(data::default_collate({{zeros({2})}, {zeros({2}, kInt64)}}),
                     "field 0 of example 1 is int64 [2], but in example 0 it is float32 [2]");
  EXPECT_EMBER_ERROR(data::default_collate({{zeros({2}), Tensor()}}),
                     "default_collate: field 1 of example 0 is undefined");
}

}  // namespace ember::testing
