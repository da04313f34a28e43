#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

// The CUDA caching allocator (PyTorch's CUDACachingAllocator): ember's allocator for kCUDA,
// installed when the library loads. Memory freed by tensors stays cached per device and stream
// and is handed out again without cudaMalloc/cudaFree; see caching_allocator.cpp for the policy.
// No CUDA types here, so a build without CUDA has these functions too (they throw). A device of
// -1 means the current one.
namespace ember {
class Tensor;
}

namespace ember::cuda {

class Stream;

// Bytes held by live tensors (rounded to the allocator's block sizes), and their peak.
size_t memory_allocated(int device = -1);
size_t max_memory_allocated(int device = -1);
// Bytes obtained from cudaMalloc (allocated plus cached), and their peak.
size_t memory_reserved(int device = -1);
size_t max_memory_reserved(int device = -1);
// Peaks restart from the current values; the accumulated counts ("allocated", "freed",
// num_alloc_retries, num_ooms, ...) restart from zero.
void reset_peak_memory_stats(int device = -1);
void reset_accumulated_memory_stats(int device = -1);

// torch.cuda.memory_stats: "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>"
// for the stats allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes,
// active_bytes, inactive_split_bytes, requested_bytes; and num_alloc_retries, num_ooms,
// num_sync_all_streams, num_device_alloc, num_device_free.
std::map<std::string, int64_t> memory_stats(int device = -1);
// torch.cuda.memory_summary: the stats as a table (abbreviated: without the per-pool rows).
std::string memory_summary(int device = -1, bool abbreviated = false);

// torch.cuda.memory._record_memory_history: while on, each block allocated remembers the innermost
// module call ("nn.Module: Linear") or kernel (its stub's name) that made it, as memory_snapshot's
// "context". Off by default; on, each module and kernel call copies its name.
void record_memory_history(bool enabled);
// torch.cuda.memory_snapshot: the device's segments and their blocks, as JSON:
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//     "requested_size", "stream", "segment_type": "small" | "large", "segment_pool_id": [a, b],
//     "blocks": [{"address", "size", "requested_size", "state", "context"}]}]}
// in address order; a block's state is "active_allocated", "active_pending_free" (freed, waiting
// for work queued on other streams) or "inactive" (free); segment_pool_id is a CUDA graph's pool,
// [0, 0] for the shared ones.
std::string memory_snapshot(int device = -1);

// Caps the memory the allocator reserves on a device at fraction * its total memory (0 to 1;
// torch.cuda.set_per_process_memory_fraction): a request beyond it frees the cache, retries, then
// throws OutOfMemoryError naming the limit. 1 lifts the cap.
void set_per_process_memory_fraction(double fraction, int device = -1);
// Gives cached segments that hold no live block back to CUDA (on every device).
void empty_cache();
// Replaces every device's allocator settings with `settings`, in EMBER_CUDA_ALLOC_CONF's form
// (cuda/allocator_config.h: max_split_size_mb, garbage_collection_threshold, ...); the keys not
// given take their defaults ("" restores them all). torch.cuda.memory._set_allocator_settings,
// which merges instead.
void set_allocator_settings(const std::string& settings);

// Declares that `stream` uses this memory too: when freed, it is reused only after the work
// queued on `stream` by then has completed. The tensor form ignores memory the allocator does
// not own (from_blob); the pointer form needs the start of a live allocation.
void record_stream(const Tensor& tensor, const Stream& stream);
void record_stream(const void* ptr, const Stream& stream);

// A CUDA graph's private memory pool (c10's MempoolId_t); {0, 0} is none. See cuda/graph.h.
using MempoolId = std::pair<uint64_t, uint64_t>;

namespace detail {
// For cuda::CUDAGraph: the capture `capture_id` (cudaStreamGetCaptureInfo's id) allocates from
// pool `pool` until end_allocate_to_pool; release_pool drops one graph's hold on the pool.
void begin_allocate_to_pool(int device, MempoolId pool, unsigned long long capture_id);
void end_allocate_to_pool(int device, unsigned long long capture_id);
void release_pool(int device, MempoolId pool);
}  // namespace detail

}  // namespace ember::cuda
