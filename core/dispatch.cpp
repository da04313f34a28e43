#include "ember/core/dispatch.h"

#include "ember/core/tensor.h"

namespace ember::detail {

constinit std::atomic<const KernelRangeHooks*> g_kernel_range_hooks{nullptr};

std::string op_range_name(OpRangeKind kind, const char* op) {
  if (kind == OpRangeKind::Frontend) return std::string("ember::") + op;
  // An op's node is "<op>_backward"; the engine's own (AccumulateGrad) keeps its name.
  const bool engine_node = op[0] >= 'A' && op[0] <= 'Z';
  return std::string("autograd::") + op + (engine_node ? "" : "_backward");
}

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

void check_kernel_device(const char* kernel, Device device, DeviceMix mix, const Tensor& t, int arg) {
  if (!t.defined()) return;
  // A stub bound to a device type without an index ("cuda") runs on the current device.
  const bool same = t.device().type == device.type && (device.index < 0 || t.device().index == device.index);
  EMBER_CHECK(same || (mix == DeviceMix::CpuScalars && t.is_cpu() && t.dim() == 0), kernel,
              ": expected all tensors to be on the same device, but found ", device, " (the kernel's) and ",
              t.device(), " (argument ", arg, ", of shape ", t.sizes(), ")");
}

void check_kernel_device(const char* kernel, Device device, DeviceMix mix, ArrayRef<Tensor> ts, int arg) {
  for (const Tensor& t : ts) check_kernel_device(kernel, device, mix, t, arg);
}

}  // namespace ember::detail
