#pragma once

// Library handles (cuBLASLt, cuDNN) per thread and device: a handle is used by one thread at a
// time, and creating one is slow (milliseconds), so a thread keeps its own and hands it back to a
// shared free list when it exits. Handles are never destroyed: destroying them during static
// destruction races the CUDA runtime's own teardown.
#include <mutex>
#include <vector>

#include "ember/core/device.h"
#include "ember/cuda/check.h"

namespace ember::cuda::detail {

inline int current_device() {
  int d = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// Kernels run on the current device: a tensor on another one is an error, not a silent
// cross-device access.
inline void check_on_current_device(const char* op, Device d) {
  const int cur = current_device();
  EMBER_CHECK(d.index < 0 || d.index == cur, op, ": tensor is on ", d,
              " but the current device is cuda:", cur);
}

// The calling thread's handle of type Handle (a pointer type) for `device`, made by kCreate()
// with `device` current.
template <class Handle, Handle (*kCreate)()>
Handle thread_handle(int device) {
  struct Pool {
    std::mutex mutex;
    std::vector<std::vector<Handle>> free;  // per device
  };
  static Pool* pool = new Pool;  // leaked on purpose, see above
  struct Local {
    std::vector<Handle> handles;  // per device, null until first use
    ~Local() {
      std::lock_guard<std::mutex> lock(pool->mutex);
      for (size_t d = 0; d < handles.size(); ++d)
        if (handles[d]) pool->free[d].push_back(handles[d]);
    }
  };
  thread_local Local local;
  const auto d = static_cast<size_t>(device);
  if (d >= local.handles.size()) local.handles.resize(d + 1, nullptr);
  Handle& h = local.handles[d];
  if (!h) {
    {
      std::lock_guard<std::mutex> lock(pool->mutex);
      if (d >= pool->free.size()) pool->free.resize(d + 1);
      if (!pool->free[d].empty()) {
        h = pool->free[d].back();
        pool->free[d].pop_back();
      }
    }
    if (!h) h = kCreate();
  }
  return h;
}

}  // namespace ember::cuda::detail
