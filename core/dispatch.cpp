#include "ember/core/dispatch.h"

#include "ember/core/tensor.h"

namespace ember::detail {

constinit std::atomic<const KernelRangeHooks*> g_kernel_range_hooks{nullptr};

void append_tensor_shape(std::string& out, const Tensor& t) {
  if (!out.empty()) out += ", ";
  out += '[';
  if (t.defined()) {
    for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
    out += "] ";
    out += to_string(t.dtype());
  } else {
    out += ']';
  }
}

}  // namespace ember::detail
