#pragma once

#include <cstddef>

#include "ember/core/device.h"

namespace ember {

// Memory and how to give it back: `deleter(ctx)` frees it; a null deleter means memory owned
// elsewhere (from_blob without a deleter).
struct DataPtr {
  void* ptr = nullptr;
  void* ctx = nullptr;
  void (*deleter)(void* ctx) = nullptr;
  Device device;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;
  // Memory on device `index` of this allocator's type (-1: the current device); the DataPtr
  // names the concrete device. Single-device allocators ignore the index.
  virtual DataPtr allocate_on(size_t nbytes, int /*index*/) { return allocate(nbytes); }
};

// The allocator for each device type. The CPU one is 64-byte aligned; the CUDA layer installs
// its caching allocator at load time.
Allocator* get_allocator(DeviceType type);
void set_allocator(DeviceType type, Allocator* allocator);

// Page-locked host memory, which the GPU copies to and from asynchronously. The CUDA layer
// installs one at load time; a build without CUDA has none (null).
class PinnedAllocator : public Allocator {
 public:
  // Whether `ptr` points into page-locked memory (from this allocator or pinned elsewhere).
  virtual bool is_pinned(const void* ptr) const = 0;
};
PinnedAllocator* get_pinned_allocator();
void set_pinned_allocator(PinnedAllocator* allocator);

}  // namespace ember
