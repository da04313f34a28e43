#pragma once

// The kernel side of device_error.h: IndexCheck::ok(k) is true for an index in [0, size); for any
// other it records the first error and returns false, and the kernel skips that element.
#include <cstdint>

#include "ember/cuda/device_error.h"

namespace ember::cuda {

struct IndexCheck {
  DeviceIndexError* err;
  int32_t op, kind, dim;
  int64_t size;

  __device__ __forceinline__ bool ok(int64_t k) const {
    if (static_cast<uint64_t>(k) < static_cast<uint64_t>(size)) return true;
    if (atomicCAS(&err->flag, 0, 1) == 0) {
      err->op = op;
      err->kind = kind;
      err->dim = dim;
      err->index = k;
      err->size = size;
      __threadfence_system();
    }
    return false;
  }
};

// The check of `op`'s indices into a dimension `dim` of `size` (host side).
inline IndexCheck index_check(const char* op, int64_t dim, int64_t size,
                              DeviceIndexError::Kind kind = DeviceIndexError::Index) {
  return {device_index_error(), device_error_op(op), kind, static_cast<int32_t>(dim), size};
}

}  // namespace ember::cuda
