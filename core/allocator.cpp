#include "ember/core/allocator.h"

#include <cstdlib>
#include <new>

#include "ember/core/error.h"

namespace ember {
namespace {

class CPUAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, nullptr, Device(kCPU)};
    // aligned_alloc wants a multiple of the alignment.
    size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    EMBER_CHECK(p, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return {p, p, &std::free, Device(kCPU)};
  }

 private:
  static constexpr size_t kAlign = 64;
};

CPUAllocator cpu_allocator;
Allocator* allocators[kNumDeviceTypes] = {&cpu_allocator, nullptr};
PinnedAllocator* pinned_allocator = nullptr;

}  // namespace

Allocator* get_allocator(DeviceType type) {
  Allocator* a = allocators[static_cast<int>(type)];
  EMBER_CHECK(a, "no allocator for device type ", Device(type),
              " (ember built without CUDA, or no GPU present)");
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) { allocators[static_cast<int>(type)] = allocator; }

PinnedAllocator* get_pinned_allocator() { return pinned_allocator; }
void set_pinned_allocator(PinnedAllocator* allocator) { pinned_allocator = allocator; }

}  // namespace ember
