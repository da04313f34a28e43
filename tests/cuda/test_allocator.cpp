// The CUDA caching allocator and the pinned host allocator (cuda/caching_allocator.h,
// cuda/host_allocator.h). Sizes and statistics are exact: the allocator's policy fixes them
// (requests round to 512 B; small pool segments are 2 MiB; large requests below 10 MiB get
// 20 MiB segments, larger ones their size rounded to 2 MiB).
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/event.h>
#include <ember/cuda/host_allocator.h>
#include <ember/cuda/stream.h>
#include <ember/nn/activation.h>
#include <ember/nn/container.h>
#include <ember/nn/linear.h>
#include <ember/optim/adam.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#endif

#include "cuda_test_util.h"
#include "host_gate.h"

namespace ember::testing {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

// A stream nothing else uses, so no block of it is cached or live elsewhere. Destroyed after
// emptying the cache, which drops its segments.
class PrivateStream {
 public:
  PrivateStream() { EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~PrivateStream() {
    cuda::empty_cache();
    cudaStreamDestroy(stream_);
  }
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;
  cuda::Stream get() const { return cuda::Stream(cuda::current_device(), stream_); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Each test allocates on its own stream after emptying the cache and resetting the counters, so
// addresses and stat changes are exact whatever other tests left allocated (that memory is in
// the baseline; when there is none, messages and the summary are checked word for word).
class CudaAllocatorTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    guard_.emplace(stream_->get());
    cuda::empty_cache();
    cuda::reset_peak_memory_stats();
    cuda::reset_accumulated_memory_stats();
    base_ = cuda::memory_stats();
  }
  void TearDown() override {
    guard_.reset();
    stream_.reset();
  }

  // How much a stat moved since SetUp (counters restarted at zero there).
  int64_t delta(const char* key) const { return cuda::memory_stats().at(key) - base_.at(key); }
  // No other memory on the device: absolute values are known too.
  bool clean() const { return base_.at("reserved_bytes.all.current") == 0; }

  std::optional<PrivateStream> stream_;
  std::optional<cuda::StreamGuard> guard_;
  std::map<std::string, int64_t> base_;
};

Tensor gpu_bytes(int64_t n) { return empty({n}, TensorOptions(kUInt8).device(kCUDA)); }
char* ptr(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

TEST_F(CudaAllocatorTest, FreedBlockIsReused) {
  char* p = nullptr;
  {
    Tensor a = gpu_bytes(1000);
    p = ptr(a);
  }
  Tensor b = gpu_bytes(1000);
  EXPECT_EQ(ptr(b), p);
  Tensor c = gpu_bytes(1000);
  EXPECT_EQ(ptr(c), p + 1024);  // the next 512-byte multiple of the same segment
  EXPECT_EQ(delta("num_device_alloc"), 1);
  EXPECT_EQ(delta("num_device_free"), 0);
}

TEST_F(CudaAllocatorTest, SegmentSizes) {
  struct Case {
    int64_t request, block, segment;
  };
  const Case cases[] = {
      {1, 512, 2 * kMiB},
      {1000, 1024, 2 * kMiB},
      {kMiB, kMiB, 2 * kMiB},             // the largest small request
      {kMiB + 1, kMiB + 512, 20 * kMiB},  // large pool, shared 20 MiB segment
      {10 * kMiB - 512, 10 * kMiB - 512, 20 * kMiB},
      {10 * kMiB, 10 * kMiB, 10 * kMiB},            // its own segment from here on
      {10 * kMiB + 1, 10 * kMiB + 512, 12 * kMiB},  // rounded to 2 MiB
      {100 * kMiB + 3, 100 * kMiB + 512, 102 * kMiB},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("request of " + std::to_string(c.request) + " bytes");
    {
      Tensor t = gpu_bytes(c.request);
      EXPECT_EQ(delta("allocated_bytes.all.current"), c.block);
      EXPECT_EQ(delta("reserved_bytes.all.current"), c.segment);
      EXPECT_EQ(delta("requested_bytes.all.current"), c.request);
    }
    cuda::empty_cache();
    EXPECT_EQ(delta("reserved_bytes.all.current"), 0);
  }
}

TEST_F(CudaAllocatorTest, SplitThenMergeIntoTheWholeSegment) {
  // Two 8 MiB blocks at the front of one 20 MiB large-pool segment.
  Tensor p = gpu_bytes(8 * kMiB), q = gpu_bytes(8 * kMiB);
  char* base = ptr(p);
  EXPECT_EQ(ptr(q), base + 8 * kMiB);
  EXPECT_EQ(delta("reserved_bytes.all.current"), 20 * kMiB);
  EXPECT_EQ(delta("inactive_split.large_pool.current"), 1);  // the free 4 MiB rest
  EXPECT_EQ(delta("inactive_split_bytes.large_pool.current"), 4 * kMiB);
  p = Tensor();  // a free piece at the front: 8 + 4 MiB free in two blocks
  EXPECT_EQ(delta("inactive_split.large_pool.current"), 2);
  EXPECT_EQ(delta("inactive_split_bytes.large_pool.current"), 12 * kMiB);
  q = Tensor();  // merges with both neighbours: the segment is whole again
  EXPECT_EQ(delta("inactive_split.large_pool.current"), 0);
  EXPECT_EQ(delta("inactive_split_bytes.large_pool.current"), 0);
  // Only the merged block can serve 20 MiB without a new segment.
  Tensor whole = gpu_bytes(20 * kMiB);
  EXPECT_EQ(ptr(whole), base);
  EXPECT_EQ(delta("reserved_bytes.all.current"), 20 * kMiB);
  EXPECT_EQ(delta("num_device_alloc"), 1);
}

TEST_F(CudaAllocatorTest, StatsAfterAKnownSequence) {
  Tensor a = gpu_bytes(1000);      // small pool: 1024 B of a new 2 MiB segment
  Tensor b = gpu_bytes(3 * kMiB);  // large pool: 3 MiB of a new 20 MiB segment
  EXPECT_EQ(delta("allocated_bytes.all.current"), 1024 + 3 * kMiB);
  EXPECT_EQ(delta("allocated_bytes.small_pool.current"), 1024);
  EXPECT_EQ(delta("allocated_bytes.large_pool.current"), 3 * kMiB);
  EXPECT_EQ(delta("requested_bytes.all.current"), 1000 + 3 * kMiB);
  EXPECT_EQ(delta("reserved_bytes.all.current"), 22 * kMiB);
  EXPECT_EQ(delta("reserved_bytes.small_pool.current"), 2 * kMiB);
  EXPECT_EQ(delta("reserved_bytes.large_pool.current"), 20 * kMiB);
  EXPECT_EQ(delta("active_bytes.all.current"), 1024 + 3 * kMiB);
  EXPECT_EQ(delta("segment.all.current"), 2);
  EXPECT_EQ(delta("allocation.all.current"), 2);
  EXPECT_EQ(delta("active.all.current"), 2);
  EXPECT_EQ(delta("inactive_split.all.current"), 2);
  EXPECT_EQ(delta("inactive_split_bytes.all.current"), (2 * kMiB - 1024) + 17 * kMiB);
  a = Tensor();
  b = Tensor();
  EXPECT_EQ(delta("allocated_bytes.all.current"), 0);
  EXPECT_EQ(delta("allocated_bytes.all.peak"), 1024 + 3 * kMiB);
  EXPECT_EQ(delta("allocated_bytes.all.allocated"), 1024 + 3 * kMiB);
  EXPECT_EQ(delta("allocated_bytes.all.freed"), 1024 + 3 * kMiB);
  EXPECT_EQ(delta("requested_bytes.all.freed"), 1000 + 3 * kMiB);
  EXPECT_EQ(delta("reserved_bytes.all.current"), 22 * kMiB);  // cached, not returned
  EXPECT_EQ(delta("reserved_bytes.all.peak"), 22 * kMiB);
  EXPECT_EQ(delta("segment.all.current"), 2);
  EXPECT_EQ(delta("allocation.all.allocated"), 2);
  EXPECT_EQ(delta("allocation.all.freed"), 2);
  EXPECT_EQ(delta("active.all.current"), 0);
  EXPECT_EQ(delta("inactive_split.all.current"), 0);
  EXPECT_EQ(delta("num_device_alloc"), 2);
  EXPECT_EQ(delta("num_device_free"), 0);
  EXPECT_EQ(delta("num_alloc_retries"), 0);
  EXPECT_EQ(delta("num_ooms"), 0);
  // The functions read the same numbers.
  std::map<std::string, int64_t> s = cuda::memory_stats();
  EXPECT_EQ(s.size(), 9u * 3 * 4 + 5);  // every stat of every pool, four values each, 5 counters
  EXPECT_EQ(cuda::memory_allocated(), size_t(s["allocated_bytes.all.current"]));
  EXPECT_EQ(cuda::max_memory_allocated(), size_t(s["allocated_bytes.all.peak"]));
  EXPECT_EQ(cuda::memory_reserved(), size_t(s["reserved_bytes.all.current"]));
  EXPECT_EQ(cuda::max_memory_reserved(), size_t(s["reserved_bytes.all.peak"]));
  if (clean()) {
    EXPECT_EQ(cuda::max_memory_allocated(), size_t(1024 + 3 * kMiB));
    EXPECT_EQ(cuda::memory_reserved(), size_t(22 * kMiB));
  }
  Tensor again = gpu_bytes(1000);  // from the cache
  EXPECT_EQ(delta("num_device_alloc"), 2);
}

TEST_F(CudaAllocatorTest, ResetPeakAndAccumulatedStats) {
  { Tensor t = gpu_bytes(4 * kMiB); }
  EXPECT_EQ(delta("allocated_bytes.all.peak"), 4 * kMiB);
  cuda::reset_peak_memory_stats();  // peaks restart at the current values
  EXPECT_EQ(cuda::max_memory_allocated(), cuda::memory_allocated());
  EXPECT_EQ(cuda::max_memory_reserved(), cuda::memory_reserved());
  EXPECT_EQ(delta("reserved_bytes.all.peak"), 20 * kMiB);
  Tensor u = gpu_bytes(kMiB);  // a small-pool segment more
  EXPECT_EQ(delta("allocated_bytes.all.peak"), kMiB);
  EXPECT_EQ(delta("reserved_bytes.all.peak"), 22 * kMiB);
  cuda::reset_accumulated_memory_stats();
  EXPECT_EQ(delta("allocated_bytes.all.allocated"), 0);
  EXPECT_EQ(delta("num_device_alloc"), 0);
  EXPECT_EQ(delta("allocated_bytes.all.current"), kMiB);  // current values stay
}

TEST_F(CudaAllocatorTest, EmptyCacheReleasesUnusedSegments) {
  Tensor keep = gpu_bytes(100);
  { Tensor big = gpu_bytes(12 * kMiB); }
  EXPECT_EQ(delta("reserved_bytes.all.current"), 14 * kMiB);
  cuda::empty_cache();  // the 12 MiB segment goes, the one holding `keep` stays
  EXPECT_EQ(delta("reserved_bytes.all.current"), 2 * kMiB);
  EXPECT_EQ(delta("num_device_free"), 1);
  keep = Tensor();
  cuda::empty_cache();
  EXPECT_EQ(delta("reserved_bytes.all.current"), 0);
  EXPECT_EQ(delta("segment.all.current"), 0);
  EXPECT_EQ(delta("num_device_free"), 2);
  if (clean()) {
    EXPECT_EQ(cuda::memory_reserved(), 0u);
  }
}

TEST_F(CudaAllocatorTest, BlocksBelongToTheirStream) {
  PrivateStream other;
  char* p = nullptr;
  {
    cuda::StreamGuard guard(other.get());
    Tensor t = gpu_bytes(1000);
    p = ptr(t);
  }
  Tensor d = gpu_bytes(1000);  // on the test's stream: not from the other stream's blocks
  EXPECT_NE(ptr(d), p);
  EXPECT_EQ(delta("reserved_bytes.all.current"), 4 * kMiB);
  cuda::StreamGuard guard(other.get());
  Tensor t = gpu_bytes(1000);
  EXPECT_EQ(ptr(t), p);
}

TEST_F(CudaAllocatorTest, RecordStreamDelaysReuse) {
  constexpr int64_t kBytes = 512 * kKiB;
  cuda::Stream side = cuda::get_stream_from_pool();
  Tensor a = gpu_bytes(kBytes);
  char* p = ptr(a);  // the start of a new small-pool segment
  {
    HostGate gate(side);
    EMBER_CUDA_CHECK(cudaMemsetAsync(a.data_ptr(), 1, kBytes, side));
    cuda::record_stream(a, side);
    cuda::record_stream(a, cuda::current_stream());  // its own stream: nothing to wait for
    a = Tensor();                                    // freed while the side stream has not written it yet
    EXPECT_EQ(delta("allocated_bytes.all.current"), 0);
    EXPECT_EQ(delta("active_bytes.all.current"), kBytes);  // still in use by the side stream
    Tensor b = gpu_bytes(kBytes);
    EXPECT_EQ(ptr(b), p + kBytes);  // not p
  }
  side.synchronize();
  Tensor c = gpu_bytes(kBytes);  // the side stream's event has completed: p is free again
  EXPECT_EQ(ptr(c), p);
  EXPECT_EQ(delta("active_bytes.all.current"), kBytes);
  EXPECT_EQ(delta("num_device_alloc"), 1);
}

TEST_F(CudaAllocatorTest, RecordStreamErrors) {
  cuda::Stream side = cuda::get_stream_from_pool();
  Tensor a = gpu_bytes(4096);
  EXPECT_EMBER_ERROR(cuda::record_stream(ones({2}), side), "record_stream", "expected a CUDA tensor", "cpu");
  EXPECT_EMBER_ERROR(cuda::record_stream(ptr(a) + 512, side), "record_stream",
                     "not the start of a live allocation");
  cuda::record_stream(a.data_ptr(), side);  // the start: accepted
  // Memory the allocator does not own has nothing to protect: ignored.
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 4096), cudaSuccess);
  Tensor foreign = from_blob(raw, {4096}, TensorOptions(kUInt8).device(Device(kCUDA, side.device_index())));
  cuda::record_stream(foreign, side);
  foreign = Tensor();
  ASSERT_EQ(cudaFree(raw), cudaSuccess);
}

TEST_F(CudaAllocatorTest, OutOfMemoryThrowsAndTheProcessGoesOn) {
  Tensor keep = gpu_bytes(1000);
  const int64_t kTiB = int64_t{1} << 40;  // far beyond any GPU (PyTorch's test asks for the same)
  std::string what;
  try {
    Tensor huge = gpu_bytes(kTiB);
    ADD_FAILURE() << "allocating 1 TiB succeeded";
  } catch (const OutOfMemoryError& e) {
    what = e.what();
  }
  std::string gpu = "GPU " + std::to_string(cuda::current_device()) + " has a total capacity of ";
  std::vector<std::string> parts = {"CUDA out of memory. Tried to allocate 1024.00 GiB. ",
                                    gpu,
                                    " GiB of which ",
                                    " is free. Of the allocated memory ",
                                    " is allocated by ember, and ",
                                    " is reserved by ember but unallocated."};
  // `keep` holds 1024 B of a 2 MiB segment, which the retry could not release.
  if (clean()) parts.push_back("memory 1024 bytes is allocated by ember, and 2.00 MiB is reserved");
  for (const std::string& part : parts)
    EXPECT_NE(what.find(part), std::string::npos) << "\"" << what << "\" lacks \"" << part << "\"";
  EXPECT_EQ(delta("num_ooms"), 1);
  EXPECT_EQ(delta("num_alloc_retries"), 1);
  // An ember::Error like any other, and the allocator still works.
  EXPECT_EMBER_ERROR(gpu_bytes(kTiB), "CUDA out of memory");
  Tensor after = gpu_bytes(4 * kMiB);
  EMBER_CUDA_CHECK(cudaMemset(after.data_ptr(), 1, 4 * kMiB));
  EXPECT_EQ(delta("allocated_bytes.all.current"), 1024 + 4 * kMiB);
}

// A fraction of the GPU caps what the allocator reserves: within it allocations succeed, beyond it
// the cache is freed, the request retried, and OutOfMemoryError names the limit; 1 lifts it.
TEST_F(CudaAllocatorTest, PerProcessMemoryFractionCapsReservedMemory) {
  const size_t total = cuda::mem_get_info().second;
  const double fraction = static_cast<double>(512 * kMiB) / static_cast<double>(total);
  cuda::set_per_process_memory_fraction(fraction);
  {
    Tensor a = gpu_bytes(200 * kMiB), b = gpu_bytes(200 * kMiB);
    std::string what;
    try {
      Tensor c = gpu_bytes(200 * kMiB);  // 600 MiB reserved in all: over the cap
      ADD_FAILURE() << "allocating beyond the fraction succeeded";
    } catch (const OutOfMemoryError& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("set_per_process_memory_fraction limits ember to "), std::string::npos) << what;
    EXPECT_EQ(delta("num_alloc_retries"), 1);
    EXPECT_LE(cuda::memory_reserved(), static_cast<size_t>(512 * kMiB));
  }
  cuda::set_per_process_memory_fraction(1);
  Tensor big = gpu_bytes(1024 * kMiB);
  EXPECT_GE(cuda::memory_reserved(), static_cast<size_t>(1024 * kMiB));
  EXPECT_EMBER_ERROR(cuda::set_per_process_memory_fraction(1.5), "set_per_process_memory_fraction: invalid",
                     "0 to 1");
}

// A step that runs out of memory in its backward leaves the model and optimizer usable (issue 25):
// after zero_grad the parameters are those before the step, and the run goes on with a smaller
// batch, as a PyTorch loop that catches torch.OutOfMemoryError does. The cap comes from a first
// run without one: between the reserved peak of the forward and that of the whole step.
TEST_F(CudaAllocatorTest, OutOfMemoryMidBackwardThenASmallerBatchTrains) {
  manual_seed(3);
  nn::Sequential model(nn::Linear(1024, 4096), nn::ReLU(), nn::Linear(4096, 1024));
  model->to(kCUDA);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
  auto batch = [](int64_t n) {
    Tensor x = randn({n, 1024}, TensorOptions().device(kCUDA));
    return std::pair{x, x.flip({1})};  // a target the model can learn
  };
  auto loss_of = [&](const Tensor& x, const Tensor& y) { return (model->forward(x) - y).pow(2).mean(); };
  // Two steps at 16384 rows: the first makes the optimizer's state, the second gives the peaks.
  auto [x, y] = batch(16384);
  int64_t forward_peak = 0, step_peak = 0;
  for (int step = 0; step < 2; ++step) {
    cuda::empty_cache();  // else the reserve cached by the last step makes both peaks one
    cuda::reset_peak_memory_stats();
    Tensor loss = loss_of(x, y);
    forward_peak = cuda::memory_stats().at("reserved_bytes.all.peak");
    loss.backward();
    opt.step();
    opt.zero_grad();
    step_peak = cuda::memory_stats().at("reserved_bytes.all.peak");
  }
  ASSERT_GT(step_peak - forward_peak, 200 * kMiB) << "the backward should need much more than the forward";
  std::vector<Tensor> before;
  for (const Tensor& p : model->parameters()) before.push_back(p.detach().clone());

  cuda::empty_cache();
  const size_t total = cuda::mem_get_info().second;
  struct Cap {  // lifted however the test ends
    explicit Cap(double fraction) { cuda::set_per_process_memory_fraction(fraction); }
    ~Cap() { cuda::set_per_process_memory_fraction(1); }
  } cap(static_cast<double>(forward_peak + step_peak) / 2 / static_cast<double>(total));
  bool forward_ran = false, backward_ran_out = false;
  try {
    Tensor l = loss_of(x, y);
    forward_ran = true;
    l.backward();
  } catch (const OutOfMemoryError&) {
    backward_ran_out = forward_ran;
  }
  EXPECT_TRUE(forward_ran);
  EXPECT_TRUE(backward_ran_out);
  opt.zero_grad();  // whatever gradients the failed backward wrote are dropped
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(model->parameters()[i].cpu().equal(before[i].cpu()));

  // The run goes on at a quarter of the batch, under the same cap, and learns.
  auto [xs, ys] = batch(4096);
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    Tensor l = loss_of(xs, ys);
    l.backward();
    opt.step();
    opt.zero_grad();
    (step == 0 ? first : last) = l.item<float>();
  }
  EXPECT_LT(last, first);
  EXPECT_GE(delta("num_ooms"), 1);
  for (const Tensor& p : model->parameters()) EXPECT_TRUE(isfinite(p).all().item<bool>());
}

// Settings for one test, back to the defaults after it.
struct AllocatorSettings {
  explicit AllocatorSettings(const std::string& s) { cuda::set_allocator_settings(s); }
  ~AllocatorSettings() { cuda::set_allocator_settings(""); }
};

// max_split_size_mb:40: a cached 64 MiB block is not split for a 4 MiB request (which gets a
// 20 MiB segment of its own, where without the setting it takes the block's front); an oversize
// request takes an oversize block only within 20 MiB of its size.
TEST_F(CudaAllocatorTest, MaxSplitSizeKeepsLargeBlocksWhole) {
  {
    gpu_bytes(64 * kMiB);  // freed at once: a cached 64 MiB segment
    Tensor small = gpu_bytes(4 * kMiB);
    EXPECT_EQ(delta("reserved_bytes.all.current"), 64 * kMiB) << "without the setting the block is split";
  }
  cuda::empty_cache();
  AllocatorSettings settings("max_split_size_mb:40");
  base_ = cuda::memory_stats();
  gpu_bytes(64 * kMiB);
  {
    Tensor small = gpu_bytes(4 * kMiB);
    EXPECT_EQ(delta("reserved_bytes.all.current"), 64 * kMiB + 20 * kMiB);
  }
  {
    Tensor fits = gpu_bytes(50 * kMiB);  // 64 < 50 + 20: the cached block serves it, whole
    EXPECT_EQ(delta("reserved_bytes.all.current"), 64 * kMiB + 20 * kMiB);
    EXPECT_EQ(delta("allocated_bytes.all.current"), 64 * kMiB);
  }
  Tensor too_small = gpu_bytes(42 * kMiB);  // 64 >= 42 + 20: a segment of its own
  EXPECT_EQ(delta("reserved_bytes.all.current"), 64 * kMiB + 20 * kMiB + 42 * kMiB);
}

// garbage_collection_threshold:0.5 of a 1 GiB cap: with 600 MiB cached, a request that needs a new
// segment first frees cached segments until reserved memory is under 512 MiB (one of the two
// suffices), where without the setting all 1000 MiB would stay reserved.
TEST_F(CudaAllocatorTest, GarbageCollectionFreesOldCachedSegments) {
  const size_t total = cuda::mem_get_info().second;
  cuda::set_per_process_memory_fraction(static_cast<double>(1024 * kMiB) / static_cast<double>(total));
  {
    AllocatorSettings settings("garbage_collection_threshold:0.5");
    { Tensor a = gpu_bytes(300 * kMiB), b = gpu_bytes(300 * kMiB); }
    EXPECT_EQ(delta("reserved_bytes.all.current"), 600 * kMiB);
    Tensor c = gpu_bytes(400 * kMiB);  // fits in neither cached block
    EXPECT_EQ(delta("reserved_bytes.all.current"), 300 * kMiB + 400 * kMiB);
    EXPECT_EQ(delta("num_device_free"), 1);
    EXPECT_EQ(delta("num_alloc_retries"), 0);  // freed by the collection, not by an out-of-memory retry
  }
  cuda::set_per_process_memory_fraction(1);
}

TEST_F(CudaAllocatorTest, AllocatorSettingsErrors) {
  EXPECT_EMBER_ERROR(cuda::set_allocator_settings("expandable_segments:True"), "set_allocator_settings",
                     "expandable_segments:True is not supported");
  EXPECT_EMBER_ERROR(cuda::set_allocator_settings("max_split_size_mb:8"), "max_split_size_mb 8 is too small");
  cuda::set_allocator_settings("");
}

// memory_snapshot: the segment of a live tensor, its blocks with their states, and, with memory
// history recorded, the module that allocated each (Linear's output, made inside its call).
TEST_F(CudaAllocatorTest, MemorySnapshotNamesSegmentsBlocksAndTheirMaker) {
  nn::Linear linear(nn::LinearOptions(256, 4096));
  linear->to(Device(kCUDA));
  Tensor x = randn({512, 256}, TensorOptions().device(kCUDA));
  cuda::record_memory_history(true);
  Tensor y = linear(x);  // 8 MiB: a 20 MiB large-pool segment of its own, split
  cuda::record_memory_history(false);
  cuda::synchronize();
  const std::string json = cuda::memory_snapshot();
  const std::string address = std::to_string(reinterpret_cast<uintptr_t>(y.data_ptr()));
  for (const std::string& part :
       {std::string("{\"segments\": [{\"device\": "),
        "\"address\": " + address + ", \"size\": " + std::to_string(8 * kMiB) +
            ", \"requested_size\": " + std::to_string(8 * kMiB) +
            ", \"state\": \"active_allocated\", \"context\": "
            "\"nn.Module: Linear\"}",
        std::string("\"state\": \"inactive\", \"context\": \"\""), std::string("\"segment_type\": \"large\""),
        std::string("\"segment_pool_id\": [0, 0]")})
    EXPECT_NE(json.find(part), std::string::npos) << part << "\nnot in " << json;
#if __has_include(<nlohmann/json.hpp>)
  nlohmann::json snap = nlohmann::json::parse(json);
  int64_t total = 0;
  for (const auto& seg : snap.at("segments")) {
    int64_t blocks = 0;
    for (const auto& b : seg.at("blocks")) blocks += b.at("size").get<int64_t>();
    EXPECT_EQ(blocks, seg.at("total_size").get<int64_t>());
    total += seg.at("total_size").get<int64_t>();
  }
  EXPECT_EQ(total, static_cast<int64_t>(cuda::memory_reserved()));
#endif
}

TEST_F(CudaAllocatorTest, MemorySummary) {
  Tensor a = gpu_bytes(kMiB);  // the first half of a 2 MiB small-pool segment
  std::string s = cuda::memory_summary();
  std::vector<std::string> lines = {
      "ember CUDA memory summary, device ID " + std::to_string(cuda::current_device()),
      "CUDA OOMs: ",
      "cudaMalloc retries: ",
      "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
      "| Allocated memory      |",
      "|       from large pool |",
      "|       from small pool |",
      "| Active memory         |",
      "| Requested memory      |",
      "| GPU reserved memory   |",
      "| Non-releasable memory |",
      "| Allocations           |",
      "| Active allocs         |",
      "| GPU reserved segments |",
      "| Non-releasable allocs |",
  };
  if (clean()) {
    for (const char* row : {
             "| Allocated memory      |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |",
             "|       from large pool |      0 KiB |      0 KiB |      0 KiB |      0 B   |",
             "|       from small pool |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |",
             "| GPU reserved memory   |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   |",
             "| Non-releasable memory |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |",
             "| Allocations           |       1    |       1    |       1    |       0    |",
             "| GPU reserved segments |       1    |       1    |       1    |       0    |",
         })
      lines.push_back(row);
  }
  for (const std::string& line : lines)
    EXPECT_NE(s.find(line), std::string::npos) << "summary lacks \"" << line << "\":\n" << s;
  // A table: every line is 77 characters wide.
  size_t start = 0, count = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    EXPECT_EQ(end - start, 77u) << s.substr(start, end - start);
    start = end + 1;
    ++count;
  }
  EXPECT_EQ(count, 6u + 9 * 4 + 1);  // header, 9 metrics (a rule and 3 rows each), closing rule
  std::string brief = cuda::memory_summary(-1, /*abbreviated=*/true);
  EXPECT_EQ(brief.find("from small pool"), std::string::npos);
  EXPECT_NE(brief.find("| Active memory         |"), std::string::npos) << brief;
}

// --- Pinned host memory ---

struct PinnedBuffer {
  explicit PinnedBuffer(size_t n) : data(get_pinned_allocator()->allocate(n)) {}
  ~PinnedBuffer() { reset(); }
  void reset() {
    if (data.deleter) data.deleter(data.ctx);
    data = {};
  }
  char* ptr() const { return static_cast<char*>(data.ptr); }
  DataPtr data;
};

TEST_F(CudaAllocatorTest, PinnedBlocksAreReusedBySize) {
  ASSERT_NE(get_pinned_allocator(), nullptr);
  cuda::host_empty_cache();
  char* p = nullptr;
  {
    PinnedBuffer a(1000);
    p = a.ptr();
    EXPECT_EQ(a.data.device, Device(kCPU));
    EXPECT_TRUE(cuda::is_pinned(p));
    EXPECT_TRUE(cuda::is_pinned(p + 1023));  // anywhere inside the 1024-byte block
  }
  PinnedBuffer b(1000);
  EXPECT_EQ(b.ptr(), p);
  PinnedBuffer c(700);  // the same 1024-byte size class, but p is taken
  EXPECT_NE(c.ptr(), p);
  char* q = c.ptr();
  c.reset();
  PinnedBuffer d(1024);
  EXPECT_EQ(d.ptr(), q);
  // Other memory: pageable, device, and pinned by someone else.
  std::vector<char> pageable(64);
  EXPECT_FALSE(cuda::is_pinned(pageable.data()));
  EXPECT_FALSE(cuda::is_pinned(gpu_bytes(64).data_ptr()));
  void* foreign = nullptr;
  ASSERT_EQ(cudaMallocHost(&foreign, 4096), cudaSuccess);
  EXPECT_TRUE(cuda::is_pinned(foreign));
  ASSERT_EQ(cudaFreeHost(foreign), cudaSuccess);
}

TEST_F(CudaAllocatorTest, PinnedBlockWaitsForItsCopies) {
  constexpr size_t kBytes = 4096;
  cuda::host_empty_cache();
  cuda::Stream side = cuda::get_stream_from_pool();
  Tensor dev = gpu_bytes(kBytes);
  {
    // Two cached blocks, so that nothing below calls cudaHostAlloc while the stream is held.
    PinnedBuffer x(kBytes), y(kBytes);
  }
  char* p = nullptr;
  {
    HostGate gate(side);
    PinnedBuffer a(kBytes);
    p = a.ptr();
    std::memset(p, 5, kBytes);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dev.data_ptr(), p, kBytes, cudaMemcpyHostToDevice, side));
    EXPECT_TRUE(cuda::host_record_event(p, side));
    int local = 0;
    EXPECT_FALSE(cuda::host_record_event(&local, side));
    a.reset();               // the copy has not run yet
    PinnedBuffer b(kBytes);  // the other cached block, not p
    EXPECT_NE(b.ptr(), p);
  }
  side.synchronize();
  PinnedBuffer c(kBytes);  // the copy is done: p is handed out again
  EXPECT_EQ(c.ptr(), p);
  std::vector<unsigned char> host(kBytes);
  EMBER_CUDA_CHECK(cudaMemcpy(host.data(), dev.data_ptr(), kBytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::count(host.begin(), host.end(), 5), int64_t(kBytes));
}

TEST_F(CudaAllocatorTest, PinMemory) {
  Tensor x = arange(12, TensorOptions(kFloat32)).reshape({3, 4});
  EXPECT_FALSE(x.is_pinned());
  Tensor y = x.pin_memory();
  EXPECT_TRUE(y.is_pinned());
  EXPECT_TRUE(y.is_cpu());
  EXPECT_FALSE(y.is_same(x));
  EXPECT_CLOSE(y, x);
  EXPECT_TRUE(y.pin_memory().is_same(y));  // already pinned: itself
  Tensor view = y.slice(1, 1);
  EXPECT_TRUE(view.is_pinned());
  EXPECT_TRUE(cuda::is_pinned(view.data_ptr()));
  Tensor t = x.t().pin_memory();  // a non-contiguous source gives a contiguous pinned copy
  EXPECT_TRUE(t.is_pinned());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_CLOSE(t, x.t());
  // The gradient passes through, as for clone.
  Tensor w = x.clone().requires_grad_();
  w.pin_memory().sum().backward();
  EXPECT_CLOSE(w.grad(), ones({3, 4}));
  Tensor g = gpu_bytes(4);
  EXPECT_FALSE(g.is_pinned());
  std::string device = g.device().str();
  EXPECT_EMBER_ERROR(g.pin_memory(), "pin_memory", "only CPU tensors", device.c_str());
}

}  // namespace
}  // namespace ember::testing
