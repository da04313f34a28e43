#pragma once

#include <atomic>
#include <concepts>
#include <string>
#include <type_traits>
#include <utility>

#include "ember/core/allocation_context.h"
#include "ember/core/array_ref.h"
#include "ember/core/device.h"
#include "ember/core/error.h"

namespace ember {

class Tensor;

namespace detail {
// Ranges around each kernel call, named after its stub (cuda::nvtx::set_emit_nvtx installs NVTX
// ones, as torch.autograd.profiler.emit_nvtx). Null when off: a call then costs one load.
// `push_with_shapes`, when set, is called instead of `push` with the kernel's tensor arguments
// described ("[4096, 768] bf16, [768] f32"), for a profiler that records shapes. `push_copied`
// opens a range whose name may not outlive the call (a module's: nn::Module's forward ranges).
// What an op's range stands for: its frontend (`ember::softmax`, PyTorch's `aten::softmax`) or
// its backward node running in the engine (`autograd::softmax_backward`).
enum class OpRangeKind : int8_t { Frontend, Backward };
struct KernelRangeHooks {
  void (*push)(const char* name);
  void (*pop)();
  void (*push_with_shapes)(const char* name, const std::string& shapes) = nullptr;
  void (*push_copied)(const char* name) = nullptr;
  // An op's range (detail::OpRange); `name` need only live through the call, `shapes` is null
  // unless shapes are recorded. Null: ops are not ranges.
  void (*push_op)(OpRangeKind kind, const char* name, const std::string* shapes) = nullptr;
};
// The name an op's range shows: "ember::softmax", "autograd::softmax_backward",
// "autograd::AccumulateGrad".
std::string op_range_name(OpRangeKind kind, const char* op);
extern std::atomic<const KernelRangeHooks*> g_kernel_range_hooks;

// Appends ", " (unless `out` is empty) and t's sizes and dtype, or "[]" for an undefined tensor.
void append_tensor_shape(std::string& out, const Tensor& t);

template <class... Args>
std::string tensor_shapes(const Args&... args) {
  std::string out;
  [[maybe_unused]] auto one = [&out](const auto& a) {
    using T = std::decay_t<decltype(a)>;
    if constexpr (std::is_same_v<T, Tensor>) {
      append_tensor_shape(out, a);
    } else if constexpr (requires {
                           { a.data() } -> std::convertible_to<const Tensor*>;
                         }) {
      for (const Tensor& t : ArrayRef<Tensor>(a.data(), a.size())) append_tensor_shape(out, t);
    }
  };
  (one(args), ...);
  return out;
}
}  // namespace detail

// Which devices a stub's tensor arguments may be on besides its own. Kernels dereference what they
// are given, so a tensor on another device would crash the process or poison the CUDA context:
// every call is checked before the kernel runs (a frontend that misses a device check still
// raises an ember::Error naming the kernel).
enum class DeviceMix : uint8_t {
  None,        // every defined tensor on the kernel's device
  CpuScalars,  // also 0-dim CPU tensors (wrapped scalars, read on the host): the elementwise kernels
  Any,         // copies between devices
};

namespace detail {
// Throws unless t (when defined) is on `device` or allowed there by `mix`; `arg` numbers it.
void check_kernel_device(const char* kernel, Device device, DeviceMix mix, const Tensor& t, int arg);
void check_kernel_device(const char* kernel, Device device, DeviceMix mix, ArrayRef<Tensor> ts, int arg);

template <class... Args>
void check_kernel_devices(const char* kernel, Device device, DeviceMix mix, const Args&... args) {
  if (mix == DeviceMix::Any) return;
  int arg = 0;
  [[maybe_unused]] auto one = [&](const auto& a) {
    using A = std::decay_t<decltype(a)>;
    if constexpr (std::is_same_v<A, Tensor> || std::is_same_v<A, ArrayRef<Tensor>>)
      check_kernel_device(kernel, device, mix, a, arg);
    ++arg;
  };
  (one(args), ...);
}
}  // namespace detail

// A stub's kernel for one device, called like the kernel itself.
template <class Fn>
class BoundKernel;
template <class R, class... Args>
class BoundKernel<R (*)(Args...)> {
 public:
  using Fn = R (*)(Args...);
  BoundKernel(Fn fn, const char* name, Device device, DeviceMix mix)
      : fn_(fn), name_(name), device_(device), mix_(mix) {}
  R operator()(Args... args) const {
    detail::check_kernel_devices(name_, device_, mix_, args...);
    detail::AllocationContext context(name_);
    const detail::KernelRangeHooks* hooks = detail::g_kernel_range_hooks.load(std::memory_order_acquire);
    if (!hooks) return fn_(std::forward<Args>(args)...);
    if (hooks->push_with_shapes)
      hooks->push_with_shapes(name_, detail::tensor_shapes(args...));
    else
      hooks->push(name_);
    struct Pop {
      const detail::KernelRangeHooks* h;
      ~Pop() { h->pop(); }
    } pop{hooks};
    return fn_(std::forward<Args>(args)...);
  }
  operator Fn() const { return fn_; }

 private:
  Fn fn_;
  const char* name_;
  Device device_;
  DeviceMix mix_;
};

// One slot per device type for a kernel of signature Fn. The CPU kernels fill theirs from
// core/cpu, the CUDA ones from cuda/, both at load time through KernelRegistrar; the op's
// frontend (shape and dtype logic, shared by all devices) calls `stub(device)(args...)`.
// The constexpr constructor makes stubs constant-initialized, so registrars in any
// translation unit may run first.
template <class Fn>
class DispatchStub {
 public:
  explicit constexpr DispatchStub(const char* name, DeviceMix mix = DeviceMix::None)
      : name_(name), mix_(mix) {}

  BoundKernel<Fn> operator()(Device d) const {
    Fn f = fns_[static_cast<int>(d.type)];
    EMBER_CHECK(f, name_, ": no kernel for device ", d,
                d.is_cuda() ? " (ember was built without CUDA support)" : "");
    return {f, name_, d, mix_};
  }
  void set(DeviceType d, Fn fn) { fns_[static_cast<int>(d)] = fn; }
  bool has(DeviceType d) const { return fns_[static_cast<int>(d)] != nullptr; }
  const char* name() const { return name_; }

 private:
  const char* name_;
  DeviceMix mix_;
  Fn fns_[kNumDeviceTypes] = {};
};

template <class Fn>
struct KernelRegistrar {
  KernelRegistrar(DispatchStub<Fn>& stub, DeviceType d, Fn fn) { stub.set(d, fn); }
};

}  // namespace ember
