#pragma once

#include <string>

#include "ember/core/dispatch.h"

namespace ember::detail {

// An op's range for the profiler and NVTX, as PyTorch's `aten::` events: the frontend's whole host
// time (argument checks, autocast, its kernels, autograd recording), with the kernels and the ops
// it calls nested inside. Put first in a frontend, with the tensors it was given; a backward node
// gets one in the engine. Off a session it costs one atomic load.
//
//   Tensor softmax(const Tensor& x, int64_t dim) { detail::OpRange range("softmax", x); ... }
class OpRange {
 public:
  template <class... Inputs>
  explicit OpRange(const char* op, const Inputs&... inputs) : OpRange(OpRangeKind::Frontend, op, inputs...) {}

  template <class... Inputs>
  OpRange(OpRangeKind kind, const char* op, const Inputs&... inputs) {
    const KernelRangeHooks* hooks = g_kernel_range_hooks.load(std::memory_order_acquire);
    if (!hooks || !hooks->push_op) return;
    if (hooks->push_with_shapes) {
      const std::string shapes = tensor_shapes(inputs...);
      hooks->push_op(kind, op, &shapes);
    } else {
      hooks->push_op(kind, op, nullptr);
    }
    pop_ = hooks->pop;
  }
  ~OpRange() {
    if (pop_) pop_();
  }
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  void (*pop_)() = nullptr;
};

}  // namespace ember::detail
