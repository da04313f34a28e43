#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "test_util.h"

namespace ember::testing {

using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

namespace {

// Sample i is (i as float [2] = {i, -i}, label i % 3 as int32). get() sleeps a little, varying
// with i, so that workers finish out of order; it counts its calls and can fail at one index.
class ProbeDataset : public data::Dataset {
 public:
  explicit ProbeDataset(int64_t n, int64_t fail_at = -1, bool std_error = false)
      : n_(n), fail_at_(fail_at), std_error_(std_error) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    calls_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds((i * 37) % 5 * 40));
    if (i == fail_at_) {
      if (std_error_) throw std::runtime_error("disk on fire");
      EMBER_CHECK(false, "ProbeDataset: cannot read sample ", i);
    }
    auto v = static_cast<double>(i);
    return {tensor({v, -v}, kFloat32), tensor(i % 3, kInt32)};
  }
  int64_t calls() const { return calls_.load(); }

 private:
  int64_t n_, fail_at_;
  bool std_error_;
  mutable std::atomic<int64_t> calls_{0};
};

// The first field's first column of every batch: the sample indices, batch by batch.
std::vector<std::vector<int64_t>> epoch_indices(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) {
    Tensor ids = batch[0].select(1, 0).to(kInt64);
    out.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// See tests/data/test_dataset.cpp for how these permutations were computed independently.
const std::vector<int64_t> kPermSeed0Epoch0 = {6, 9, 8, 3, 1, 0, 7, 4, 5, 2};
const std::vector<int64_t> kPermSeed0Epoch1 = {4, 9, 7, 0, 5, 2, 8, 6, 1, 3};

}  // namespace

TEST(DataLoader, BatchesInOrderWithoutShuffle) {
  Tensor x = arange(20, kFloat32).view({10, 2});
  Tensor y = arange(10, kInt32);
  DataLoader loader(data::TensorDataset(x, y), DataLoaderOptions().batch_size(4));
  EXPECT_EQ(loader.size(), 3);
  int64_t n = 0;
  std::vector<int64_t> sizes;
  for (auto& batch : loader) {
    ASSERT_EQ(batch.size(), 2u);
    EXPECT_CLOSE(batch[0], x.narrow(0, 4 * n, batch[0].size(0)));
    EXPECT_CLOSE(batch[1], y.narrow(0, 4 * n, batch[1].size(0)).to(kInt64));
    sizes.push_back(batch[0].size(0));
    ++n;
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  // A second loop is a second epoch, the same order without shuffle.
  EXPECT_EQ(flat(epoch_indices(loader)), flat(epoch_indices(loader)));
}

TEST(DataLoader, DropLastAndSizeAgree) {
  for (int64_t n : {0, 1, 7, 8, 9}) {
    for (int64_t bs : {1, 4, 8, 10}) {
      for (bool drop : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " batch_size=" << bs << " drop_last=" << drop);
        DataLoader loader(std::make_shared<ProbeDataset>(n),
                          DataLoaderOptions().batch_size(bs).drop_last(drop).num_workers(n % 2));
        const int64_t expected = drop ? n / bs : (n + bs - 1) / bs;
        EXPECT_EQ(loader.size(), expected);
        std::vector<std::vector<int64_t>> batches = epoch_indices(loader);
        EXPECT_EQ(static_cast<int64_t>(batches.size()), expected);
        int64_t samples = 0;
        for (const auto& b : batches) {
          EXPECT_TRUE(b.size() == static_cast<size_t>(bs) || (!drop && &b == &batches.back()));
          samples += static_cast<int64_t>(b.size());
        }
        EXPECT_EQ(samples, drop ? expected * bs : n);
      }
    }
  }
}

TEST(DataLoader, ShuffleOrderIsFixedBySeedAndEpoch) {
  auto d = std::make_shared<ProbeDataset>(10);
  DataLoader loader(d, DataLoaderOptions().batch_size(3).shuffle(true).seed(0));
  EXPECT_EQ(loader.epoch(), 0);
  EXPECT_EQ(flat(epoch_indices(loader)), kPermSeed0Epoch0);
  EXPECT_EQ(loader.epoch(), 1);  // each loop moves to the next epoch, reshuffled
  EXPECT_EQ(flat(epoch_indices(loader)), kPermSeed0Epoch1);
  loader.set_epoch(0);  // resume at epoch 0
  EXPECT_EQ(flat(epoch_indices(loader)), kPermSeed0Epoch0);
  // The batches are the permutation cut in threes.
  loader.set_epoch(1);
  std::vector<std::vector<int64_t>> b = epoch_indices(loader);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[3], std::vector<int64_t>{3});
  DataLoader other(d, DataLoaderOptions().batch_size(3).shuffle(true).seed(1));
  EXPECT_NE(flat(epoch_indices(other)), kPermSeed0Epoch0);
}

// Resuming mid-epoch: set_epoch's start batch skips the batches before it (never built), and the
// next epoch starts at its first batch again.
TEST(DataLoader, SetEpochStartsMidEpoch) {
  auto d = std::make_shared<ProbeDataset>(10);
  DataLoader loader(d, DataLoaderOptions().batch_size(3).shuffle(true).seed(0).num_workers(2));
  loader.set_epoch(1);
  const std::vector<std::vector<int64_t>> whole = epoch_indices(loader);
  loader.set_epoch(1, 2);
  EXPECT_EQ(epoch_indices(loader), std::vector<std::vector<int64_t>>(whole.begin() + 2, whole.end()));
  EXPECT_EQ(loader.epoch(), 2);
  EXPECT_EQ(epoch_indices(loader).size(), 4u);
  loader.set_epoch(0, 4);  // past the last batch: an empty epoch
  EXPECT_TRUE(epoch_indices(loader).empty());
  EXPECT_EMBER_ERROR(loader.set_epoch(0, 5), "DataLoader::set_epoch", "start_batch 5", "[0, 4]");
  EXPECT_EMBER_ERROR(loader.set_epoch(0, -1), "DataLoader::set_epoch", "start_batch -1");
}

TEST(DataLoader, SameBatchesForAnyNumberOfWorkers) {
  auto d = std::make_shared<ProbeDataset>(103);
  auto run = [&](int64_t workers, int64_t prefetch) {
    DataLoader loader(
        d, DataLoaderOptions().batch_size(8).shuffle(true).seed(11).num_workers(workers).prefetch_factor(
               prefetch));
    std::vector<Example> out;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& batch : loader) out.push_back(batch);
    return out;
  };
  std::vector<Example> reference = run(0, 2);
  ASSERT_EQ(reference.size(), 2u * 13);
  for (auto [workers, prefetch] : {std::pair{1, 1}, {2, 2}, {3, 1}, {4, 3}}) {
    SCOPED_TRACE(::testing::Message() << "num_workers=" << workers << " prefetch_factor=" << prefetch);
    std::vector<Example> got = run(workers, prefetch);
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_CLOSE(got[i][0], reference[i][0], Tolerance{0, 0});
      EXPECT_CLOSE(got[i][1], reference[i][1], Tolerance{0, 0});
    }
  }
}

TEST(DataLoader, WorkersStayABoundedDistanceAhead) {
  auto d = std::make_shared<ProbeDataset>(64);
  const int64_t bs = 2, workers = 2, prefetch = 2;
  DataLoader loader(d, DataLoaderOptions().batch_size(bs).num_workers(workers).prefetch_factor(prefetch));
  int64_t taken = 0;
  for (auto& batch : loader) {
    (void)batch;
    ++taken;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slow training step
    // Workers claim batch b only while b < taken + num_workers * prefetch_factor.
    EXPECT_LE(d->calls(), (taken + workers * prefetch) * bs);
  }
  EXPECT_EQ(taken, 32);
  EXPECT_EQ(d->calls(), 64);
}

TEST(DataLoader, LeavingTheLoopEarlyStopsTheWorkers) {
  auto d = std::make_shared<ProbeDataset>(1000);
  DataLoader loader(d, DataLoaderOptions().batch_size(4).num_workers(3).prefetch_factor(2));
  int64_t taken = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch[0].size(0), 4);
    if (++taken == 2) break;
  }
  // The workers are joined when the loop's iterator goes: nothing more is read.
  const int64_t calls = d->calls();
  EXPECT_LE(calls, (2 + 3 * 2) * 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(d->calls(), calls);
  // The loader is still usable: the next loop is the next epoch.
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_EQ(epoch_indices(loader).size(), 250u);
}

TEST(DataLoader, DestroyingTheLoaderStopsAnEpochInProgress) {
  for (int64_t workers : {0, 2}) {
    SCOPED_TRACE(::testing::Message() << "num_workers=" << workers);
    auto d = std::make_shared<ProbeDataset>(100);
    auto loader = std::make_unique<DataLoader>(d, DataLoaderOptions().batch_size(2).num_workers(workers));
    DataLoader::Iterator it = loader->begin();
    EXPECT_EQ((*it)[0].size(0), 2);
    loader.reset();
    const int64_t calls = d->calls();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(d->calls(), calls);
    EXPECT_EMBER_ERROR(++it, "DataLoader: the loader was destroyed during the epoch");
    EXPECT_TRUE(it == DataLoader::Iterator());  // the epoch is over
  }
}

TEST(DataLoader, WorkerErrorsReachTheLoopWithTheirIndex) {
  for (int64_t workers : {0, 1, 3}) {
    SCOPED_TRACE(::testing::Message() << "num_workers=" << workers);
    DataLoader loader(std::make_shared<ProbeDataset>(40, 13),
                      DataLoaderOptions().batch_size(4).num_workers(workers));
    int64_t taken = 0;
    std::string message;
    try {
      for (auto& batch : loader) {
        (void)batch;
        ++taken;
      }
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(taken, 3);  // batches 0-2 arrive, in order, before batch 3 fails
    EXPECT_NE(message.find("batch 3, dataset index 13: ProbeDataset: cannot read sample 13"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("worker") != std::string::npos, workers > 0) << message;
    // The next epoch runs again (and fails again at the same place).
    EXPECT_EMBER_ERROR(epoch_indices(loader), "dataset index 13");
  }
  // Exceptions of any type are reported, with their message.
  DataLoader loader(std::make_shared<ProbeDataset>(8, 0, true),
                    DataLoaderOptions().batch_size(4).num_workers(2));
  EXPECT_EMBER_ERROR(loader.begin(), "DataLoader: worker", "batch 0, dataset index 0: disk on fire");
  // Errors from collate name the batch too.
  auto ragged = std::make_shared<data::TensorDataset>(zeros({4, 2}));
  DataLoader bad(ragged, DataLoaderOptions().batch_size(2).collate_fn([](std::vector<Example> ex) -> Example {
    EMBER_CHECK(ex.size() > 5, "my_collate: too few");
    return {};
  }));
  EXPECT_EMBER_ERROR(bad.begin(), "DataLoader: batch 0 (collate): my_collate: too few");
}

// Samples carry the id of the worker that read them (-1 for the loop's thread).
class WhoReadsDataset : public data::Dataset {
 public:
  int64_t size() const override { return 12; }
  Example get(int64_t i) const override {
    std::optional<data::WorkerInfo> info = data::get_worker_info();
    EXPECT_TRUE(!info || (info->id >= 0 && info->id < info->num_workers));
    return {tensor(i), tensor(info ? info->id : -1)};
  }
};

TEST(DataLoader, WorkerInitFnAndWorkerInfo) {
  std::mutex mutex;
  std::vector<int64_t> inits;
  auto record = [&](int64_t id) {
    EXPECT_EQ(data::get_worker_info()->id, id);
    std::lock_guard<std::mutex> lock(mutex);
    inits.push_back(id);
  };
  auto dataset = std::make_shared<WhoReadsDataset>();
  DataLoader loader(dataset, DataLoaderOptions().batch_size(2).num_workers(3).worker_init_fn(record));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> readers;
    for (auto& batch : loader)
      for (int64_t k = 0; k < batch[1].numel(); ++k) readers.insert(batch[1][k].item<int64_t>());
    EXPECT_TRUE(std::includes(std::set<int64_t>{0, 1, 2}.begin(), std::set<int64_t>{0, 1, 2}.end(),
                              readers.begin(), readers.end()));
  }
  // Once per worker and epoch: workers start anew each epoch, as PyTorch's by default.
  std::sort(inits.begin(), inits.end());
  EXPECT_EQ(inits, (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_FALSE(data::get_worker_info().has_value());  // the loop's thread
  // Without workers the loop's thread reads, and there is nothing to initialize.
  bool called = false;
  DataLoader inline_loader(dataset,
                           DataLoaderOptions().batch_size(4).worker_init_fn([&](int64_t) { called = true; }));
  for (auto& batch : inline_loader) EXPECT_TRUE(batch[1].equal(full({4}, -1, kInt64)));
  EXPECT_FALSE(called);
  // A worker_init_fn that throws ends the loop with an error naming the worker.
  DataLoader failing(dataset, DataLoaderOptions().batch_size(2).num_workers(2).worker_init_fn([](int64_t id) {
    if (id == 1) throw std::runtime_error("no GPU for this worker");
  }));
  for (int epoch = 0; epoch < 3; ++epoch)
    EXPECT_EMBER_ERROR(failing.begin(), "worker_init_fn of worker 1", "no GPU for this worker");
}

// Samples 0..n-1 as (i as float [1]); records which threads read them.
class ThreadRecordingDataset : public data::Dataset {
 public:
  explicit ThreadRecordingDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    readers_.insert(std::this_thread::get_id());
    return {full({1}, static_cast<double>(i))};
  }
  std::set<std::thread::id> readers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return readers_;
  }

 private:
  int64_t n_;
  mutable std::mutex mutex_;
  mutable std::set<std::thread::id> readers_;
};

// persistent_workers: the same threads serve every epoch, worker_init_fn runs once in each, an
// epoch left early is followed by a whole one, and the batches are those of fresh workers.
TEST(DataLoader, PersistentWorkersServeEveryEpoch) {
  auto fresh_data = std::make_shared<ThreadRecordingDataset>(20);
  auto persistent_data = std::make_shared<ThreadRecordingDataset>(20);
  std::atomic<int> inits{0};
  const DataLoaderOptions options = DataLoaderOptions().batch_size(3).num_workers(2).shuffle(true).seed(5);
  DataLoader fresh(fresh_data, options);
  DataLoader persistent(persistent_data, DataLoaderOptions(options).persistent_workers(true).worker_init_fn(
                                             [&](int64_t) { inits++; }));
  auto ids = [](DataLoader& loader) {
    std::vector<int64_t> out;
    for (auto& batch : loader)
      for (int64_t k = 0; k < batch[0].size(0); ++k)
        out.push_back(static_cast<int64_t>(batch[0][k][0].item<double>()));
    return out;
  };
  for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(ids(persistent), ids(fresh));
  for (auto& batch : persistent) {  // an epoch left after one batch
    EXPECT_EQ(batch[0].size(0), 3);
    break;
  }
  fresh.set_epoch(4);
  EXPECT_EQ(ids(persistent), ids(fresh));
  DataLoader::Iterator older = persistent.begin();
  DataLoader::Iterator newer = persistent.begin();  // ends the older epoch: one runs at a time
  EXPECT_EMBER_ERROR(++older, "DataLoader: a new epoch began before this one ended");
  EXPECT_EQ((*newer)[0].size(0), 3);
  EXPECT_EQ(inits, 2);
  EXPECT_EQ(persistent_data->readers().size(), 2u);
  EXPECT_EMBER_ERROR(DataLoader(fresh_data, DataLoaderOptions().persistent_workers(true)),
                     "DataLoader: persistent_workers needs num_workers > 0");
}

// An IterableDataset's streams start again at each epoch in the same persistent workers.
TEST(DataLoader, PersistentWorkersRestartAnIterableDatasetsStreams) {
  struct Count : data::IterableDataset {
    data::SampleGenerator iter() const override {
      const int64_t w = data::get_worker_info()->id;
      return [i = w]() mutable -> std::optional<Example> {
        if (i >= 4) return std::nullopt;
        const int64_t v = i;
        i += 2;
        return Example{full({}, v, kInt64)};
      };
    }
  };
  DataLoader loader(Count(), DataLoaderOptions().batch_size(2).num_workers(2).persistent_workers(true));
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::vector<int64_t>> batches;
    for (auto& batch : loader) batches.push_back({batch[0][0].item<int64_t>(), batch[0][1].item<int64_t>()});
    EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
  }
}

TEST(DataLoader, CustomSamplerAndCollate) {
  struct Reverse : data::Sampler {
    int64_t size() const override { return 5; }
    std::vector<int64_t> indices() const override { return {4, 3, 2, 1, 0}; }
  };
  auto d = std::make_shared<data::TensorDataset>(arange(5));
  auto sum_collate = [](std::vector<Example> ex) {
    Tensor s = zeros({}, kInt64);
    for (const Example& e : ex) s = s + e[0];
    return Example{s};
  };
  DataLoader loader(d, DataLoaderOptions().batch_size(2).collate_fn(sum_collate),
                    std::make_shared<Reverse>());
  std::vector<int64_t> sums;
  for (auto& batch : loader) sums.push_back(batch[0].item<int64_t>());
  EXPECT_EQ(sums, (std::vector<int64_t>{7, 3, 0}));
  EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().shuffle(true), std::make_shared<Reverse>()),
                     "DataLoader: a sampler and shuffle=true cannot be combined");
}

TEST(DataLoader, EmptyDatasetAndIteratorRules) {
  DataLoader loader(std::make_shared<ProbeDataset>(0), DataLoaderOptions().batch_size(4).num_workers(2));
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(loader.begin() == loader.end());
  int64_t n = 0;
  for (auto& b : loader) n += static_cast<int64_t>(b.size());
  EXPECT_EQ(n, 0);
  DataLoader::Iterator end = loader.end();
  EXPECT_EMBER_ERROR(*end, "DataLoader::Iterator: dereferencing the end of an epoch");
  EXPECT_EMBER_ERROR(++end, "DataLoader::Iterator: incrementing past the end of an epoch");
}

TEST(DataLoader, RejectsBadOptions) {
  auto d = std::make_shared<ProbeDataset>(4);
  EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().batch_size(0)),
                     "DataLoader: batch_size must be positive, got 0");
  EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().num_workers(-1)),
                     "DataLoader: num_workers must be non-negative, got -1");
  EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().prefetch_factor(0)),
                     "DataLoader: prefetch_factor must be positive, got 0");
  EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().collate_fn(nullptr)),
                     "DataLoader: collate_fn is empty");
  EXPECT_EMBER_ERROR(DataLoader(std::shared_ptr<const data::Dataset>()), "DataLoader: the dataset is null");
}

TEST(DataLoader, PinMemoryGivesPinnedBatchesOrNeedsCuda) {
  auto d = std::make_shared<data::TensorDataset>(arange(6, kFloat32), arange(6));
  if (!cuda::is_available()) {
    EXPECT_EMBER_ERROR(DataLoader(d, DataLoaderOptions().pin_memory(true)),
                       "DataLoader: pin_memory requires CUDA");
    return;
  }
  DataLoader loader(d, DataLoaderOptions().batch_size(4).pin_memory(true).num_workers(1));
  std::vector<int64_t> labels;
  for (auto& batch : loader) {
    for (const Tensor& t : batch) EXPECT_TRUE(t.is_pinned());
    for (int64_t i = 0; i < batch[1].numel(); ++i) labels.push_back(batch[1][i].item<int64_t>());
  }
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

}  // namespace ember::testing
