#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ember/core/allocator.h"
#include "ember/core/intrusive_ptr.h"

namespace ember {

namespace detail {
// How the profiler learns of tensor memory (profile_memory): called with +nbytes when
// make_storage allocates a storage and with -nbytes when that storage is freed. Null when off.
using MemoryHook = void (*)(const void* ptr, int64_t bytes, Device device);
extern std::atomic<MemoryHook> g_memory_hook;
}  // namespace detail

// A block of memory shared by a tensor and its views. The version counter lives here because
// views share it: an in-place write through any view bumps it, and autograd compares it.
class StorageImpl : public IntrusiveTarget {
 public:
  // `allocated`: the memory came from the device's allocator (make_storage), not from elsewhere.
  StorageImpl(DataPtr data, size_t nbytes, bool allocated = false)
      : data_(data), nbytes_(nbytes), allocated_(allocated) {}
  ~StorageImpl() override {
    if (allocated_ && nbytes_ > 0)
      if (detail::MemoryHook hook = detail::g_memory_hook.load(std::memory_order_acquire))
        hook(data_.ptr, -static_cast<int64_t>(nbytes_), data_.device);
    if (data_.deleter) data_.deleter(data_.ctx);
  }

  void* data() const { return data_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  DataPtr data_;
  size_t nbytes_;
  bool allocated_;
  std::atomic<uint32_t> version_{0};
};

using Storage = IntrusivePtr<StorageImpl>;

Storage make_storage(size_t nbytes, Device device);

}  // namespace ember
