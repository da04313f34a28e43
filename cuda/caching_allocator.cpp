// The CUDA caching allocator, after PyTorch's c10/cuda/CUDACachingAllocator.cpp.
//
// Memory comes from cudaMalloc in segments, which are cut into blocks. Requests are rounded up to
// 512 B; up to 1 MiB they are served from the small pool (2 MiB segments), larger ones from the
// large pool (20 MiB segments below 10 MiB, else a segment of the request rounded to 2 MiB). A
// free block is found best-fit among the free blocks of the same stream (a std::set ordered by
// stream, size, address), split when the rest is worth keeping, and merged with its free
// neighbours when it comes back. Freed memory is never returned to CUDA on the hot path: only
// empty_cache() and an out-of-memory retry call cudaFree.
//
// Settings (cuda/allocator_config.h, EMBER_CUDA_ALLOC_CONF): with max_split_size, blocks of that
// size or more are never split and serve only requests of that size or more (wasting at most a
// large segment's 20 MiB), as PyTorch's; with garbage_collection_threshold, a request that needs a
// new segment while reserved memory is past the threshold first frees cached whole segments, the
// longest unused first (age: requests served from their pool since they were freed).
//
// Streams: a block belongs to the stream it was allocated on, so reusing it in stream order is
// safe. A block also used on other streams (record_stream) gets an event recorded on each of
// them when freed and returns to the pool once they have completed (checked on each malloc).
//
// CUDA graphs (cuda/graph.h): while a stream captures, what it allocates comes from the capture's
// private pool, never from the shared pools, and goes back there when freed: a replay writes
// exactly the memory the capture was given, so no other tensor may hold it. A private pool lives
// until every graph that captured into it is reset; its segments are then freed once their blocks
// are. During a capture nothing is freed to CUDA and no event is queried (both would break the
// capture): frees that need events wait until the last capture ends.
#include "ember/cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "ember/core/allocation_context.h"
#include "ember/core/allocator.h"
#include "ember/core/json_string.h"
#include "ember/core/tensor.h"
#include "ember/cuda/allocator_config.h"
#include "ember/cuda/check.h"
#include "ember/cuda/device.h"
#include "ember/cuda/device_support.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {
namespace {

constexpr size_t kMinBlockSize = 512;        // every block size is a multiple of this
constexpr size_t kSmallSize = 1 << 20;       // largest request served from the small pool
constexpr size_t kSmallBuffer = 2 << 20;     // small pool segment
constexpr size_t kLargeBuffer = 20 << 20;    // large pool segment for requests below kMinLargeAlloc
constexpr size_t kMinLargeAlloc = 10 << 20;  // from here on a request gets its own segment
constexpr size_t kRoundLarge = 2 << 20;      // ... rounded up to this
// Beyond this, rounding up could overflow; no device has that much memory anyway.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

struct Block;
struct PrivatePool;

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const;
};

struct BlockPool {
  std::set<Block*, BlockLess> blocks;  // the free blocks
  bool is_small;
  PrivatePool* owner = nullptr;  // the graph pool it belongs to, if any
  int64_t requests = 0;          // searches for a free block so far: the clock of block ages
};

// A CUDA graph's memory: its own small and large pools, held by the graphs that captured into it.
struct PrivatePool {
  BlockPool small{{}, true, this};
  BlockPool large{{}, false, this};
  int use_count = 1;
  int64_t segments = 0;
};

// A piece of one segment; the blocks of a segment form a list in address order, and all belong
// to the stream the segment was first allocated for.
struct Block {
  Block(int device, cudaStream_t stream, size_t size, BlockPool* pool, char* ptr)
      : device(device), stream(stream), size(size), pool(pool), ptr(ptr) {}

  int device;
  cudaStream_t stream;
  size_t size;
  BlockPool* pool;
  char* ptr;
  size_t requested = 0;  // the caller's size, while allocated
  std::string context;   // what allocated it, while memory history is recorded
  bool allocated = false;
  int event_count = 0;   // events that must complete before the block returns to its pool
  int64_t freed_at = 0;  // its pool's `requests` when it became free (garbage collection's age)
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<cudaStream_t> stream_uses;  // other streams it was used on (record_stream)

  bool is_split() const { return prev || next; }
  bool is_free() const { return !allocated && event_count == 0; }
};

bool BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<cudaStream_t>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

// One statistic as PyTorch keeps it: current value, its peak, and the sums of increases
// ("allocated") and decreases ("freed").
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void add(int64_t delta) {
    current += delta;
    peak = std::max(peak, current);
    (delta > 0 ? allocated : freed) += delta > 0 ? delta : -delta;
  }
};
constexpr const char* kPoolNames[] = {"all", "small_pool", "large_pool"};
using StatArray = std::array<Stat, 3>;  // indexed like kPoolNames

struct DeviceStats {
  StatArray allocation, segment, active, inactive_split;
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0, num_device_alloc = 0,
          num_device_free = 0;
};

// Every StatArray with its memory_stats key and memory_summary title, in the summary's order.
struct StatInfo {
  const char* key;
  const char* title;
  StatArray DeviceStats::*stat;
  bool is_bytes;
};
constexpr StatInfo kStats[] = {
    {"allocated_bytes", "Allocated memory", &DeviceStats::allocated_bytes, true},
    {"active_bytes", "Active memory", &DeviceStats::active_bytes, true},
    {"requested_bytes", "Requested memory", &DeviceStats::requested_bytes, true},
    {"reserved_bytes", "GPU reserved memory", &DeviceStats::reserved_bytes, true},
    {"inactive_split_bytes", "Non-releasable memory", &DeviceStats::inactive_split_bytes, true},
    {"allocation", "Allocations", &DeviceStats::allocation, false},
    {"active", "Active allocs", &DeviceStats::active, false},
    {"segment", "GPU reserved segments", &DeviceStats::segment, false},
    {"inactive_split", "Non-releasable allocs", &DeviceStats::inactive_split, false},
};

void update(StatArray& s, const BlockPool& pool, int64_t delta) {
  s[0].add(delta);
  s[pool.is_small ? 1 : 2].add(delta);
}

// PyTorch's format_size for messages: "512 bytes", "2.00 MiB".
std::string format_size(size_t n) {
  char buf[48];
  if (n <= 1024)
    std::snprintf(buf, sizeof buf, "%zu bytes", n);
  else if (n <= (size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f KiB", n / 1024.0);
  else if (n <= (size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", n / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", n / 1073741824.0);
  return buf;
}

class DeviceAllocator {
 public:
  DeviceAllocator(int device, const AllocatorConfig& config) : config_(config), device_(device) {}

  Block* malloc(size_t nbytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_pools_.empty()) process_events();
    size_t size =
        nbytes > kMaxRequest ? kMaxRequest : round_up(std::max(nbytes, kMinBlockSize), kMinBlockSize);
    PrivatePool* graph_pool = capturing_pool(stream);
    BlockPool& pool = size <= kSmallSize ? (graph_pool ? graph_pool->small : small_)
                                         : (graph_pool ? graph_pool->large : large_);
    Block* block = take_free_block(pool, size, stream);
    if (!block) {
      if (config_.garbage_collection_threshold > 0 && capture_pools_.empty()) collect_garbage();
      block = new_segment(pool, size, stream);
    }
    return use_block(block, size, nbytes);
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    BlockPool& pool = *block->pool;
    block->allocated = false;
    allocated_.erase(block->ptr);
    update(stats_.allocation, pool, -1);
    update(stats_.allocated_bytes, pool, -static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, pool, -static_cast<int64_t>(block->requested));
    if (block->stream_uses.empty()) {
      return_to_pool(block);
    } else if (!capture_pools_.empty()) {
      ++block->event_count;  // held out of its pool until the captures end
      deferred_.push_back(block);
    } else {
      record_free_events(block);
    }
  }

  // CUDA graphs: from here until end_allocate_to_pool, what the capture `capture_id` allocates
  // comes from the private pool `id` (made on first use, else shared with the graphs holding it).
  void begin_allocate_to_pool(MempoolId id, unsigned long long capture_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<PrivatePool>& pool = graph_pools_[id];
    if (pool)
      ++pool->use_count;
    else
      pool = std::make_unique<PrivatePool>();
    capture_pools_[capture_id] = pool.get();
  }

  void end_allocate_to_pool(unsigned long long capture_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_pools_.erase(capture_id);
    if (!capture_pools_.empty()) return;
    for (Block* block : deferred_) {
      --block->event_count;
      record_free_events(block);
    }
    deferred_.clear();
    release_unused_pools();
  }

  // A graph that held pool `id` is reset: with no holder left, its free segments go back to CUDA,
  // the others when their blocks are freed.
  void release_pool(MempoolId id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = graph_pools_.find(id);
    if (it == graph_pools_.end()) return;
    --it->second->use_count;
    if (capture_pools_.empty()) release_unused_pools();
  }

  // False when `ptr` is not the start of a live block of this device.
  bool record_stream(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_.find(ptr);
    if (it == allocated_.end()) return false;
    Block* block = it->second;
    if (stream != block->stream &&
        std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
      block->stream_uses.push_back(stream);
    return true;
  }

  // torch.cuda.set_per_process_memory_fraction: segments beyond `bytes` reserved fail as CUDA's
  // own out-of-memory does (the cache is freed, one retry, then OutOfMemoryError).
  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
  }

  void set_config(const AllocatorConfig& config) {
    std::lock_guard<std::mutex> lock(mutex_);
    config_ = config;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    EMBER_CHECK(capture_pools_.empty(), "empty_cache: a CUDA graph is being captured on cuda:", device_,
                ", and freeing memory to CUDA during a capture would invalidate it");
    release_cached_segments();
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  // memory_snapshot's JSON for this device.
  std::string snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    // Every segment through its first block: any block's list leads to it.
    std::set<Block*, std::less<>> heads;
    auto add = [&](Block* b) {
      while (b->prev) b = b->prev;
      heads.insert(b);
    };
    for (const auto& [ptr, b] : allocated_) add(b);
    for (BlockPool* pool : {&small_, &large_})
      for (Block* b : pool->blocks) add(b);
    for (const auto& [id, pool] : graph_pools_)
      for (BlockPool* p : {&pool->small, &pool->large})
        for (Block* b : p->blocks) add(b);
    for (const auto& [stream, queue] : pending_)
      for (const auto& [event, b] : queue) add(b);
    for (Block* b : deferred_) add(b);
    std::vector<Block*> sorted(heads.begin(), heads.end());
    std::sort(sorted.begin(), sorted.end(), [](const Block* a, const Block* b) { return a->ptr < b->ptr; });

    // ", \"key\": value" (the first field of an object without the comma).
    auto field = [](std::string& out, const char* key, const std::string& value) {
      if (out.back() != '{') out += ", ";
      out += '"';
      out += key;
      out += "\": ";
      out += value;
    };
    auto num = [](auto v) { return std::to_string(v); };
    auto address = [](const void* p) { return std::to_string(reinterpret_cast<uintptr_t>(p)); };
    std::string out = "{\"segments\": [";
    for (size_t s = 0; s < sorted.size(); ++s) {
      const Block* head = sorted[s];
      size_t total = 0, allocated = 0, active = 0, requested = 0;
      std::string blocks;
      for (const Block* b = head; b; b = b->next) {
        total += b->size;
        if (b->allocated) {
          allocated += b->size;
          requested += b->requested;
        }
        if (!b->is_free()) active += b->size;
        std::string context;
        append_json_string(context, b->allocated ? b->context : "");
        if (!blocks.empty()) blocks += ", ";
        blocks += '{';
        field(blocks, "address", address(b->ptr));
        field(blocks, "size", num(b->size));
        field(blocks, "requested_size", num(b->allocated ? b->requested : 0));
        field(blocks, "state",
              b->allocated         ? "\"active_allocated\""
              : b->event_count > 0 ? "\"active_pending_free\""
                                   : "\"inactive\"");
        field(blocks, "context", context);
        blocks += '}';
      }
      MempoolId pool_id{0, 0};
      for (const auto& [id, pool] : graph_pools_)
        if (head->pool->owner == pool.get()) pool_id = id;
      if (s) out += ", ";
      out += '{';
      field(out, "device", num(device_));
      field(out, "address", address(head->ptr));
      field(out, "total_size", num(total));
      field(out, "allocated_size", num(allocated));
      field(out, "active_size", num(active));
      field(out, "requested_size", num(requested));
      field(out, "stream", address(head->stream));
      field(out, "segment_type", head->pool->is_small ? "\"small\"" : "\"large\"");
      std::string ids = num(pool_id.first);
      ids += ", ";
      ids += num(pool_id.second);
      field(out, "segment_pool_id", '[' + ids + ']');
      field(out, "blocks", '[' + blocks + ']');
      out += '}';
    }
    out += "]}";
    return out;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const StatInfo& info : kStats)
      for (Stat& s : stats_.*info.stat) s.peak = s.current;
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const StatInfo& info : kStats)
      for (Stat& s : stats_.*info.stat) s.allocated = s.freed = 0;
    stats_.num_alloc_retries = stats_.num_ooms = stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = stats_.num_device_free = 0;
  }

 private:
  // The private pool of the capture `stream` takes part in, if it captures into one.
  PrivatePool* capturing_pool(cudaStream_t stream) {
    if (capture_pools_.empty()) return nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    EMBER_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
    if (status != cudaStreamCaptureStatusActive) return nullptr;
    auto it = capture_pools_.find(id);
    return it == capture_pools_.end() ? nullptr : it->second;
  }

  void record_free_events(Block* block) {
    DeviceGuard guard(device_);  // the legacy default stream is the current device's
    for (cudaStream_t s : block->stream_uses) {
      cudaEvent_t event = spare_event();
      EMBER_CUDA_CHECK(cudaEventRecord(event, s));
      ++block->event_count;
      pending_[s].emplace_back(event, block);
    }
    block->stream_uses.clear();
  }

  // The smallest free block of `stream` that holds `size`, taken out of the pool. With
  // max_split_size, an oversize block serves only an oversize request it exceeds by less than a
  // large segment.
  Block* take_free_block(BlockPool& pool, size_t size, cudaStream_t stream) {
    ++pool.requests;
    Block key(device_, stream, size, &pool, nullptr);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    const size_t max_split = config_.max_split_size;
    if (size < max_split ? block->size >= max_split : block->size >= size + kLargeBuffer) return nullptr;
    pool.blocks.erase(it);
    return block;
  }

  Block* new_segment(BlockPool& pool, size_t size, cudaStream_t stream) {
    size_t segment_size = pool.is_small           ? kSmallBuffer
                          : size < kMinLargeAlloc ? kLargeBuffer
                                                  : round_up(size, kRoundLarge);
    void* ptr = nullptr;
    cudaError_t err = device_malloc(&ptr, segment_size);
    if (err == cudaErrorMemoryAllocation && capture_pools_.empty()) {
      // Give every cached segment nobody uses back to CUDA and try once more.
      release_cached_segments();
      ++stats_.num_alloc_retries;
      err = device_malloc(&ptr, segment_size);
    }
    if (err == cudaErrorMemoryAllocation) {
      ++stats_.num_ooms;
      throw OutOfMemoryError(oom_message(segment_size));
    }
    EMBER_CUDA_CHECK(err);
    update(stats_.segment, pool, 1);
    update(stats_.reserved_bytes, pool, static_cast<int64_t>(segment_size));
    ++stats_.num_device_alloc;
    if (pool.owner) ++pool.owner->segments;
    return new Block{device_, stream, segment_size, &pool, static_cast<char*>(ptr)};
  }

  cudaError_t device_malloc(void** ptr, size_t size) {
    DeviceGuard guard(device_);
    // A capture in the default (global) mode refuses cudaMalloc on this thread; the graph only
    // needs the address, so the call runs in relaxed mode, as PyTorch's does.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const bool capturing = !capture_pools_.empty();
    if (capturing) EMBER_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const auto reserved = static_cast<size_t>(stats_.reserved_bytes[0].current);
    cudaError_t err = reserved + size > limit_ ? cudaErrorMemoryAllocation : cudaMalloc(ptr, size);
    if (err != cudaSuccess) cudaGetLastError();  // not sticky: clear it for later checks
    if (capturing) EMBER_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    return err;
  }

  std::string oom_message(size_t segment_size) {
    auto [free, total] = mem_get_info(device_);
    int64_t allocated = stats_.allocated_bytes[0].current;
    int64_t cached = stats_.reserved_bytes[0].current - allocated;
    const char* capture = capture_pools_.empty()
                              ? ""
                              : " A CUDA graph is being captured, so the cache was not freed "
                                "to make room.";
    return ember::detail::str_cat(
        "CUDA out of memory. Tried to allocate ", format_size(segment_size), ". GPU ", device_,
        " has a total capacity of ", format_size(total), " of which ", format_size(free),
        " is free. Of the allocated memory ", format_size(static_cast<size_t>(allocated)),
        " is allocated by ember, and ", format_size(static_cast<size_t>(cached)),
        " is reserved by ember but unallocated.", capture,
        limit_ == SIZE_MAX ? ""
                           : ember::detail::str_cat(" set_per_process_memory_fraction limits ember to ",
                                                    format_size(limit_), " on this GPU."));
  }

  // Hands out the front `size` bytes of a free block; a remainder worth keeping stays in the pool.
  Block* use_block(Block* block, size_t size, size_t nbytes) {
    BlockPool& pool = *block->pool;
    bool was_split = block->is_split();
    size_t rest_size = block->size - size;
    if (pool.is_small ? rest_size >= kMinBlockSize
                      : size < config_.max_split_size && rest_size > kSmallSize) {
      Block* rest = new Block{device_, block->stream, rest_size, &pool, block->ptr + size};
      rest->freed_at = pool.requests;
      rest->prev = block;
      rest->next = block->next;
      if (rest->next) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.blocks.insert(rest);
      // Free pieces of split segments are "inactive split": not releasable by empty_cache.
      if (was_split) {
        update(stats_.inactive_split_bytes, pool, -static_cast<int64_t>(size));
      } else {
        update(stats_.inactive_split, pool, 1);
        update(stats_.inactive_split_bytes, pool, static_cast<int64_t>(rest_size));
      }
    } else if (was_split) {
      update(stats_.inactive_split, pool, -1);
      update(stats_.inactive_split_bytes, pool, -static_cast<int64_t>(block->size));
    }
    block->allocated = true;
    block->requested = nbytes;
    block->context =
        ember::detail::recording_allocation_context() ? ember::detail::current_allocation_context() : "";
    allocated_.emplace(block->ptr, block);
    auto bytes = static_cast<int64_t>(block->size);
    update(stats_.allocation, pool, 1);
    update(stats_.allocated_bytes, pool, bytes);
    update(stats_.active, pool, 1);
    update(stats_.active_bytes, pool, bytes);
    update(stats_.requested_bytes, pool, static_cast<int64_t>(nbytes));
    return block;
  }

  // A freed block (its events done) goes back to its pool, merged with free neighbours.
  void return_to_pool(Block* block) {
    BlockPool& pool = *block->pool;
    auto active_bytes = static_cast<int64_t>(block->size);
    int64_t split_count = 0, split_bytes = 0;
    for (Block* n : {block->prev, block->next}) {
      if (!n || !n->is_free()) continue;
      // A free neighbour was an inactive split block; it is absorbed.
      pool.blocks.erase(n);
      --split_count;
      split_bytes -= static_cast<int64_t>(n->size);
      if (n == block->prev) {
        block->ptr = n->ptr;
        block->prev = n->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = n->next;
        if (block->next) block->next->prev = block;
      }
      block->size += n->size;
      delete n;
    }
    block->freed_at = pool.requests;
    pool.blocks.insert(block);
    if (block->is_split()) {
      ++split_count;
      split_bytes += static_cast<int64_t>(block->size);
    }
    update(stats_.inactive_split, pool, split_count);
    update(stats_.inactive_split_bytes, pool, split_bytes);
    update(stats_.active, pool, -1);
    update(stats_.active_bytes, pool, -active_bytes);
    if (pool.owner && pool.owner->use_count == 0 && capture_pools_.empty()) release_unused_pools();
  }

  cudaEvent_t spare_event() {
    if (!spare_events_.empty()) {
      cudaEvent_t e = spare_events_.back();
      spare_events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  void event_done(cudaEvent_t event, Block* block) {
    spare_events_.push_back(event);
    if (--block->event_count == 0) return_to_pool(block);
  }

  // Returns blocks whose events have completed to their pools (events complete in order per stream).
  void process_events() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto& queue = it->second;
      while (!queue.empty()) {
        cudaError_t err = cudaEventQuery(queue.front().first);
        if (err == cudaErrorNotReady) {
          cudaGetLastError();
          break;
        }
        EMBER_CUDA_CHECK(err);
        event_done(queue.front().first, queue.front().second);
        queue.pop_front();
      }
      it = queue.empty() ? pending_.erase(it) : std::next(it);
    }
  }

  void release_cached_segments() {
    if (!pending_.empty()) ++stats_.num_sync_all_streams;
    for (auto& [stream, queue] : pending_) {
      for (auto [event, block] : queue) {
        EMBER_CUDA_CHECK(cudaEventSynchronize(event));
        event_done(event, block);
      }
    }
    pending_.clear();
    free_whole_segments(small_);
    free_whole_segments(large_);
    release_unused_pools();
    for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
    spare_events_.clear();
  }

  // Gives the pool's free blocks that are whole segments back to CUDA.
  void free_whole_segments(BlockPool& pool) {
    std::optional<DeviceGuard> guard;  // set only when there is something to free
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      if ((*it)->is_split()) {
        ++it;
        continue;
      }
      if (!guard) guard.emplace(device_);
      it = free_segment(pool, it);
    }
  }

  // Gives one free whole-segment block back to CUDA (the caller holds a DeviceGuard).
  std::set<Block*, BlockLess>::iterator free_segment(BlockPool& pool,
                                                     std::set<Block*, BlockLess>::iterator it) {
    Block* block = *it;
    EMBER_CUDA_CHECK(cudaFree(block->ptr));
    update(stats_.segment, pool, -1);
    update(stats_.reserved_bytes, pool, -static_cast<int64_t>(block->size));
    ++stats_.num_device_free;
    if (pool.owner) --pool.owner->segments;
    delete block;
    return pool.blocks.erase(it);
  }

  // garbage_collection_threshold (PyTorch's garbage_collect_cached_blocks): past the threshold of
  // the memory this allocator may use, frees cached whole segments of the shared pools whose age
  // is at least the mean age, oldest first, until reserved memory is back under the threshold.
  void collect_garbage() {
    const size_t allowed = std::min(limit_, total_memory());
    const auto target =
        static_cast<int64_t>(config_.garbage_collection_threshold * static_cast<double>(allowed));
    if (stats_.reserved_bytes[0].current <= target) return;
    struct Candidate {
      int64_t age;
      BlockPool* pool;
      Block* block;
    };
    std::vector<Candidate> candidates;
    for (BlockPool* pool : {&small_, &large_})
      for (Block* b : pool->blocks)
        if (!b->is_split()) candidates.push_back({pool->requests - b->freed_at, pool, b});
    if (candidates.empty()) return;
    double mean = 0;
    for (const Candidate& c : candidates)
      mean += static_cast<double>(c.age) / static_cast<double>(candidates.size());
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.age > b.age; });
    DeviceGuard guard(device_);
    for (const Candidate& c : candidates) {
      if (static_cast<double>(c.age) < mean || stats_.reserved_bytes[0].current <= target) break;
      free_segment(*c.pool, c.pool->blocks.find(c.block));
    }
  }

  size_t total_memory() {
    if (total_memory_ == 0) total_memory_ = mem_get_info(device_).second;
    return total_memory_;
  }

  // Frees what graph pools no graph holds any more; a pool goes when its last segment does.
  void release_unused_pools() {
    for (auto it = graph_pools_.begin(); it != graph_pools_.end();) {
      PrivatePool& pool = *it->second;
      if (pool.use_count > 0) {
        ++it;
        continue;
      }
      free_whole_segments(pool.small);
      free_whole_segments(pool.large);
      it = pool.segments == 0 ? graph_pools_.erase(it) : std::next(it);
    }
  }

  std::mutex mutex_;
  AllocatorConfig config_;
  size_t limit_ = SIZE_MAX;  // bytes reserved at most (set_per_process_memory_fraction)
  size_t total_memory_ = 0;  // the device's, once asked
  const int device_;
  BlockPool small_{{}, true};
  BlockPool large_{{}, false};
  std::unordered_map<const void*, Block*> allocated_;  // live blocks by address
  // Events recorded on each stream when blocks used there were freed, oldest first.
  std::unordered_map<cudaStream_t, std::deque<std::pair<cudaEvent_t, Block*>>> pending_;
  std::vector<cudaEvent_t> spare_events_;
  DeviceStats stats_;
  std::map<MempoolId, std::unique_ptr<PrivatePool>> graph_pools_;
  std::unordered_map<unsigned long long, PrivatePool*> capture_pools_;  // by capture id, while capturing
  std::vector<Block*> deferred_;  // freed during a capture, their stream uses not yet recorded
};

// One allocator per device, never destroyed: tensors may be freed during static destruction.
// Its settings come from EMBER_CUDA_ALLOC_CONF when the first one is made (a bad value is an
// error at the first use of a device, naming the variable).
DeviceAllocator& device_allocator(int device) {
  static std::deque<DeviceAllocator>* all = [] {
    const char* env = std::getenv("EMBER_CUDA_ALLOC_CONF");
    const AllocatorConfig config = detail::parse_allocator_config(env ? env : "", "EMBER_CUDA_ALLOC_CONF");
    auto* d = new std::deque<DeviceAllocator>;
    for (int i = 0; i < device_count(); ++i) d->emplace_back(i, config);
    return d;
  }();
  return (*all)[device];
}

class CachingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override { return allocate_on(nbytes, -1); }

  DataPtr allocate_on(size_t nbytes, int index) override {
    int device = detail::resolve_device("CUDA caching allocator", index);
    detail::check_kernel_image("CUDA caching allocator", device);
    if (nbytes == 0) return {nullptr, nullptr, nullptr, Device(kCUDA, device)};
    Block* block = device_allocator(device).malloc(nbytes, current_stream(device).stream());
    return {block->ptr, block, &release, Device(kCUDA, device)};
  }

 private:
  static void release(void* ctx) {
    auto* block = static_cast<Block*>(ctx);
    try {
      device_allocator(block->device).free(block);
    } catch (const Error&) {
      // Recording the free's events failed (a failed device, or CUDA shutting down at exit):
      // the block is leaked rather than reused while a stream may still touch it.
    }
  }
};

[[maybe_unused]] const bool installed = [] {
  set_allocator(kCUDA, new CachingAllocator);
  return true;
}();

DeviceAllocator& allocator_for(const char* op, int device) {
  return device_allocator(detail::resolve_device(op, device));
}

// memory_summary's cells, as torch.cuda.memory_summary formats them: the unit is chosen from the
// metric's "all" value so that its rows line up.
std::string format_cell(int64_t value, int64_t all_value, bool is_bytes) {
  static const char* const kByteUnits[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  static const char* const kCountUnits[] = {" ", "K", "M"};
  const int64_t step = is_bytes ? 1024 : 1000, threshold = is_bytes ? 768 * 1024 : 750 * 1000;
  const int last_unit = is_bytes ? 5 : 2;
  int unit = 0;
  for (double pref = static_cast<double>(all_value); unit < last_unit && pref >= threshold; ++unit) {
    value /= step;
    pref /= step;
  }
  char buf[48];
  if (is_bytes)
    std::snprintf(buf, sizeof buf, "%6lld %s", static_cast<long long>(value), kByteUnits[unit]);
  else
    std::snprintf(buf, sizeof buf, "%7lld %s ", static_cast<long long>(value), kCountUnits[unit]);
  return buf;
}

std::string centered(const std::string& text, size_t width) {
  size_t left = text.size() < width ? (width - text.size()) / 2 : 0;
  std::string s = std::string(left, ' ') + text;
  return s + std::string(s.size() < width ? width - s.size() : 0, ' ');
}

}  // namespace

size_t memory_allocated(int device) {
  return allocator_for("memory_allocated", device).stats().allocated_bytes[0].current;
}
size_t max_memory_allocated(int device) {
  return allocator_for("max_memory_allocated", device).stats().allocated_bytes[0].peak;
}
size_t memory_reserved(int device) {
  return allocator_for("memory_reserved", device).stats().reserved_bytes[0].current;
}
size_t max_memory_reserved(int device) {
  return allocator_for("max_memory_reserved", device).stats().reserved_bytes[0].peak;
}
void set_per_process_memory_fraction(double fraction, int device) {
  EMBER_CHECK(fraction >= 0 && fraction <= 1, "set_per_process_memory_fraction: invalid fraction ", fraction,
              ", allowed range is 0 to 1");
  const int d = detail::resolve_device("set_per_process_memory_fraction", device);
  const size_t total = mem_get_info(d).second;
  device_allocator(d).set_limit(fraction == 1 ? SIZE_MAX
                                              : static_cast<size_t>(fraction * static_cast<double>(total)));
}

void reset_peak_memory_stats(int device) { allocator_for("reset_peak_memory_stats", device).reset_peak(); }
void reset_accumulated_memory_stats(int device) {
  allocator_for("reset_accumulated_memory_stats", device).reset_accumulated();
}

std::map<std::string, int64_t> memory_stats(int device) {
  DeviceStats s = allocator_for("memory_stats", device).stats();
  std::map<std::string, int64_t> out;
  for (const StatInfo& info : kStats) {
    for (int p = 0; p < 3; ++p) {
      std::string prefix = std::string(info.key) + "." + kPoolNames[p] + ".";
      const Stat& stat = (s.*info.stat)[p];
      out[prefix + "current"] = stat.current;
      out[prefix + "peak"] = stat.peak;
      out[prefix + "allocated"] = stat.allocated;
      out[prefix + "freed"] = stat.freed;
    }
  }
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  return out;
}

std::string memory_summary(int device, bool abbreviated) {
  device = detail::resolve_device("memory_summary", device);
  DeviceStats s = device_allocator(device).stats();
  constexpr size_t kWidth = 75;
  const std::string double_rule = "|" + std::string(kWidth, '=') + "|\n";
  const std::string rule = "|" + std::string(kWidth, '-') + "|\n";
  std::ostringstream os;
  os << double_rule << "|"
     << centered("ember CUDA memory summary, device ID " + std::to_string(device), kWidth) << "|\n"
     << rule << "|" << centered("CUDA OOMs: " + std::to_string(s.num_ooms), 37) << "|"
     << centered("cudaMalloc retries: " + std::to_string(s.num_alloc_retries), 37) << "|\n"
     << double_rule << "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n";
  // Rows per metric: all pools, then (unless abbreviated) the large and the small pool.
  constexpr int kRowPools[] = {0, 2, 1};
  static const char* const kRowNames[] = {nullptr, "      from small pool", "      from large pool"};
  for (const StatInfo& info : kStats) {
    os << rule;
    const StatArray& stat = s.*info.stat;
    for (int p : kRowPools) {
      if (abbreviated && p != 0) break;
      char name[32];
      std::snprintf(name, sizeof name, "%-21s", p == 0 ? info.title : kRowNames[p]);
      auto cell = [&](int64_t Stat::*field) {
        return format_cell(stat[p].*field, stat[0].*field, info.is_bytes);
      };
      os << "| " << name << " | " << cell(&Stat::current) << " | " << cell(&Stat::peak) << " | "
         << cell(&Stat::allocated) << " | " << cell(&Stat::freed) << " |\n";
    }
  }
  os << double_rule;
  return os.str();
}

void empty_cache() {
  for (int d = 0; d < device_count(); ++d) device_allocator(d).empty_cache();
}

void record_memory_history(bool enabled) { ember::detail::g_record_allocation_context.store(enabled); }

std::string memory_snapshot(int device) { return allocator_for("memory_snapshot", device).snapshot(); }

void set_allocator_settings(const std::string& settings) {
  const AllocatorConfig config = detail::parse_allocator_config(settings, "set_allocator_settings");
  for (int d = 0; d < device_count(); ++d) device_allocator(d).set_config(config);
}

namespace detail {

void begin_allocate_to_pool(int device, MempoolId pool, unsigned long long capture_id) {
  device_allocator(device).begin_allocate_to_pool(pool, capture_id);
}
void end_allocate_to_pool(int device, unsigned long long capture_id) {
  device_allocator(device).end_allocate_to_pool(capture_id);
}
void release_pool(int device, MempoolId pool) { device_allocator(device).release_pool(pool); }

}  // namespace detail

void record_stream(const void* ptr, const Stream& stream) {
  int device = detail::resolve_device("record_stream", stream.device_index());
  EMBER_CHECK(device_allocator(device).record_stream(ptr, stream.stream()), "record_stream: ", ptr,
              " is not the start of a live allocation of ember's CUDA caching allocator on cuda:", device);
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  EMBER_CHECK(tensor.is_cuda(), "record_stream: expected a CUDA tensor, got one on ", tensor.device());
  EMBER_CHECK(tensor.device().index == stream.device_index(), "record_stream: the tensor is on ",
              tensor.device(), " but the stream on cuda:", stream.device_index());
  const void* base = tensor.impl().storage()->data();
  if (base) device_allocator(stream.device_index()).record_stream(base, stream.stream());
}

}  // namespace ember::cuda
