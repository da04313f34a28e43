#include "ember/cuda/host_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ember/core/allocator.h"
#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {

constexpr size_t kMinSize = 512;

struct HostBlock {
  HostBlock(size_t size, char* ptr) : size(size), ptr(ptr) {}

  size_t size;
  char* ptr;
  bool allocated = false;
  int event_count = 0;          // events that must complete before the block is reused
  std::vector<Stream> streams;  // streams that used it while allocated
};

struct PendingEvent {
  cudaEvent_t event;
  int device;
  HostBlock* block;
};

class CachingHostAllocator final : public PinnedAllocator {
 public:
  static CachingHostAllocator& instance() {
    static auto* a = new CachingHostAllocator;  // never destroyed: pinned tensors may outlive statics
    return *a;
  }

  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, nullptr, Device(kCPU)};
    EMBER_CHECK(nbytes <= std::numeric_limits<size_t>::max() / 2 + 1, "pin_memory: cannot pin ", nbytes,
                " bytes");
    size_t size = std::bit_ceil(std::max(nbytes, kMinSize));
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();
    HostBlock* block = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      block = it->second.back();
      it->second.pop_back();
    } else {
      block = new_block(size);
    }
    block->allocated = true;
    return {block->ptr, block, &release, Device(kCPU)};
  }

  bool is_pinned(const void* ptr) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (find_block(ptr)) return true;
    }
    // Memory pinned elsewhere (cudaHostRegister, cudaMallocHost).
    if (!ptr || !is_available()) return false;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attr.type == cudaMemoryTypeHost;
  }

  bool record_event(const void* ptr, const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    HostBlock* block = find_block(ptr);
    if (!block || !block->allocated) return false;
    if (std::find(block->streams.begin(), block->streams.end(), stream) == block->streams.end())
      block->streams.push_back(stream);
    return true;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_free_blocks();
  }

 private:
  static void release(void* ctx) {
    try {
      instance().free(static_cast<HostBlock*>(ctx));
    } catch (const Error&) {
      // Recording the events failed (CUDA shutting down at exit): leak the block rather than
      // reuse memory a copy may still read.
    }
  }

  void free(HostBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    for (const Stream& s : block->streams) {
      DeviceGuard guard(s.device_index());
      cudaEvent_t event = spare_event(s.device_index());
      EMBER_CUDA_CHECK(cudaEventRecord(event, s));
      ++block->event_count;
      pending_.push_back({event, s.device_index(), block});
    }
    block->streams.clear();
    if (block->event_count == 0) free_[block->size].push_back(block);
  }

  HostBlock* find_block(const void* ptr) const {
    auto it = blocks_.upper_bound(static_cast<const char*>(ptr));
    if (it == blocks_.begin()) return nullptr;
    --it;
    return static_cast<const char*>(ptr) < it->first + it->second->size ? it->second : nullptr;
  }

  HostBlock* new_block(size_t size) {
    detail::resolve_device("pin_memory", -1);  // a clean error without a GPU
    void* ptr = nullptr;
    cudaError_t err = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_free_blocks();
      err = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
    }
    EMBER_CUDA_CHECK(err);
    auto* block = new HostBlock{size, static_cast<char*>(ptr)};
    blocks_.emplace(block->ptr, block);
    return block;
  }

  cudaEvent_t spare_event(int device) {
    std::vector<cudaEvent_t>& spare = spare_events_[device];
    if (!spare.empty()) {
      cudaEvent_t e = spare.back();
      spare.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  // Frees blocks whose copies have completed, oldest event first.
  void process_events() {
    while (!pending_.empty()) {
      PendingEvent p = pending_.front();
      cudaError_t err = cudaEventQuery(p.event);
      if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return;
      }
      EMBER_CUDA_CHECK(err);
      pending_.pop_front();
      spare_events_[p.device].push_back(p.event);
      if (--p.block->event_count == 0) free_[p.block->size].push_back(p.block);
    }
  }

  void release_free_blocks() {
    process_events();
    for (auto& [size, blocks] : free_) {
      for (HostBlock* b : blocks) {
        blocks_.erase(b->ptr);
        EMBER_CUDA_CHECK(cudaFreeHost(b->ptr));
        delete b;
      }
      blocks.clear();
    }
    for (auto& [device, events] : spare_events_)
      for (cudaEvent_t e : events) cudaEventDestroy(e);
    spare_events_.clear();
  }

  mutable std::mutex mutex_;
  std::map<const char*, HostBlock*> blocks_;                  // every block by address
  std::unordered_map<size_t, std::vector<HostBlock*>> free_;  // free blocks by size
  std::deque<PendingEvent> pending_;
  std::unordered_map<int, std::vector<cudaEvent_t>> spare_events_;
};

[[maybe_unused]] const bool installed = [] {
  set_pinned_allocator(&CachingHostAllocator::instance());
  return true;
}();

}  // namespace

bool is_pinned(const void* ptr) { return CachingHostAllocator::instance().is_pinned(ptr); }

bool host_record_event(const void* ptr, const Stream& stream) {
  return CachingHostAllocator::instance().record_event(ptr, stream);
}

void host_empty_cache() { CachingHostAllocator::instance().empty_cache(); }

}  // namespace ember::cuda
