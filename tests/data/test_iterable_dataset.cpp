// DataLoader over an IterableDataset: batches in stream order, workers that take their share by
// get_worker_info() and hand over batches in turn (PyTorch's order, ends included), the epoch,
// errors naming worker, batch and sample, and a loop that leaves an endless stream early.
#include <atomic>
#include <stdexcept>

#include "test_util.h"

namespace ember::testing {
namespace {

using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

// Samples 0, 1, ... n - 1 (each an int64 scalar) in order, or endless when n < 0; with workers,
// worker w of k takes those with i % k == w unless `whole`. Sample `fail_at` throws.
class Numbers : public data::IterableDataset {
 public:
  explicit Numbers(int64_t n, bool whole = false, int64_t fail_at = -1)
      : n_(n), whole_(whole), fail_at_(fail_at) {}
  data::SampleGenerator iter() const override {
    const std::optional<data::WorkerInfo> info = data::get_worker_info();
    const int64_t step = info && !whole_ ? info->num_workers : 1;
    ++*passes_;
    return [i = info && !whole_ ? info->id : 0, step, n = n_,
            fail_at = fail_at_]() mutable -> std::optional<Example> {
      if (n >= 0 && i >= n) return std::nullopt;
      if (i == fail_at) throw std::runtime_error("cannot read " + std::to_string(i));
      const int64_t v = i;
      i += step;
      return Example{full({}, v, kInt64)};
    };
  }
  void set_epoch(int64_t epoch) const override { *last_epoch_ = epoch; }
  int64_t passes() const { return *passes_; }
  int64_t last_epoch() const { return *last_epoch_; }

 private:
  std::shared_ptr<std::atomic<int64_t>> passes_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> last_epoch_ = std::make_shared<std::atomic<int64_t>>(-1);
  int64_t n_;
  bool whole_;
  int64_t fail_at_;
};

std::vector<std::vector<int64_t>> epoch_batches(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) {
    const Tensor& ids = batch[0];
    out.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  return out;
}

using Batches = std::vector<std::vector<int64_t>>;

TEST(IterableDataLoader, BatchesTheStreamInOrder) {
  auto numbers = std::make_shared<Numbers>(10);
  DataLoader loader(numbers, DataLoaderOptions().batch_size(4));
  EXPECT_EQ(epoch_batches(loader), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(numbers->last_epoch(), 0);
  EXPECT_EQ(epoch_batches(loader), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(numbers->last_epoch(), 1);
  EXPECT_EQ(numbers->passes(), 2);  // one pass per epoch
  DataLoader dropping(Numbers(10), DataLoaderOptions().batch_size(4).drop_last(true));
  EXPECT_EQ(epoch_batches(dropping), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  DataLoader empty(Numbers(0), DataLoaderOptions().batch_size(4));
  EXPECT_TRUE(epoch_batches(empty).empty());
}

// Each worker batches its own share; the loop takes one batch from each worker in turn and skips
// a worker once its stream has ended.
TEST(IterableDataLoader, WorkersHandOverTheirBatchesInTurn) {
  DataLoader two(Numbers(11), DataLoaderOptions().batch_size(2).num_workers(2));
  // Worker 0: 0 2 4 6 8 10; worker 1: 1 3 5 7 9.
  EXPECT_EQ(epoch_batches(two), (Batches{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9}}));
  // Worker 2 of 3 (2 5 8 11) runs out a batch before workers 0 (0 3 6 9 12) and 1 (1 4 7 10 13).
  DataLoader three(Numbers(14), DataLoaderOptions().batch_size(2).num_workers(3).prefetch_factor(1));
  EXPECT_EQ(epoch_batches(three), (Batches{{0, 3}, {1, 4}, {2, 5}, {6, 9}, {7, 10}, {8, 11}, {12}, {13}}));
  // A dataset that ignores get_worker_info gives every worker the whole stream, as in PyTorch.
  DataLoader whole(Numbers(3, /*whole=*/true), DataLoaderOptions().batch_size(3).num_workers(2));
  EXPECT_EQ(epoch_batches(whole), (Batches{{0, 1, 2}, {0, 1, 2}}));
  // worker_init_fn runs in each worker at each epoch, before its stream starts.
  std::atomic<int> inits{0};
  DataLoader counted(Numbers(4), DataLoaderOptions().batch_size(2).num_workers(2).worker_init_fn(
                                     [&](int64_t) { inits.fetch_add(1); }));
  epoch_batches(counted);
  epoch_batches(counted);
  EXPECT_EQ(inits, 4);
}

TEST(IterableDataLoader, ErrorsNameTheWorkerBatchAndSample) {
  DataLoader inline_loader(Numbers(10, false, 5), DataLoaderOptions().batch_size(4));
  EXPECT_EMBER_ERROR(epoch_batches(inline_loader), "DataLoader: batch 1, sample 1: cannot read 5");
  DataLoader workers(Numbers(10, false, 5), DataLoaderOptions().batch_size(2).num_workers(2));
  EXPECT_EMBER_ERROR(epoch_batches(workers), "DataLoader: worker 1, batch 1, sample 0: cannot read 5");
  DataLoader init(Numbers(4), DataLoaderOptions().num_workers(2).worker_init_fn([](int64_t w) {
    if (w == 1) throw std::runtime_error("no disk");
  }));
  EXPECT_EMBER_ERROR(epoch_batches(init), "DataLoader: worker_init_fn of worker 1: no disk");
  DataLoader collate(Numbers(4),
                     DataLoaderOptions().batch_size(2).collate_fn(
                         [](std::vector<Example>) -> Example { throw std::runtime_error("ragged"); }));
  EXPECT_EMBER_ERROR(epoch_batches(collate), "DataLoader: batch 0 (collate): ragged");
  EXPECT_EMBER_ERROR(DataLoader(Numbers(4), DataLoaderOptions().shuffle(true)), "cannot be shuffled");
  DataLoader loader(Numbers(4));
  EXPECT_EMBER_ERROR(loader.size(), "DataLoader: an IterableDataset has no length");
  EXPECT_EMBER_ERROR(loader.set_epoch(1, 2), "starts at batch 0");
  EXPECT_EMBER_ERROR(loader.dataset(), "IterableDataset");
  EXPECT_EMBER_ERROR(DataLoader(std::shared_ptr<const data::IterableDataset>()), "the dataset is null");
}

// Leaving the loop over an endless stream stops the workers, which wait with full queues.
TEST(IterableDataLoader, LeavingAnEndlessStreamStopsTheWorkers) {
  auto numbers = std::make_shared<Numbers>(-1);
  {
    DataLoader loader(numbers, DataLoaderOptions().batch_size(3).num_workers(3));
    int64_t seen = 0;
    for (auto& batch : loader) {
      EXPECT_EQ(batch[0].numel(), 3);
      if (++seen == 10) break;
    }
    EXPECT_EQ(seen, 10);
  }
  EXPECT_EQ(numbers->passes(), 3);
}

}  // namespace
}  // namespace ember::testing
