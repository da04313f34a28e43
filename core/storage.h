#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ember/core/allocator.h"
#include "ember/core/intrusive_ptr.h"

namespace ember {

// A block of memory shared by a tensor and its views. The version counter lives here because
// views share it: an in-place write through any view bumps it, and autograd compares it.
class StorageImpl : public IntrusiveTarget {
 public:
  StorageImpl(DataPtr data, size_t nbytes) : data_(data), nbytes_(nbytes) {}
  ~StorageImpl() override {
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
  std::atomic<uint32_t> version_{0};
};

using Storage = IntrusivePtr<StorageImpl>;

Storage make_storage(size_t nbytes, Device device);

}  // namespace ember
