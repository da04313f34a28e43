#pragma once

#include "ember/core/device.h"
#include "ember/core/error.h"

namespace ember {

// One slot per device type for a kernel of signature Fn. The CPU kernels fill theirs from
// core/cpu, the CUDA ones from cuda/, both at load time through KernelRegistrar; the op's
// frontend (shape and dtype logic, shared by all devices) calls `stub(device)(args...)`.
// The constexpr constructor makes stubs constant-initialized, so registrars in any
// translation unit may run first.
template <class Fn>
class DispatchStub {
 public:
  explicit constexpr DispatchStub(const char* name) : name_(name) {}

  Fn operator()(Device d) const {
    Fn f = fns_[static_cast<int>(d.type)];
    EMBER_CHECK(f, name_, ": no kernel for device ", d,
                d.is_cuda() ? " (ember was built without CUDA support)" : "");
    return f;
  }
  void set(DeviceType d, Fn fn) { fns_[static_cast<int>(d)] = fn; }
  bool has(DeviceType d) const { return fns_[static_cast<int>(d)] != nullptr; }
  const char* name() const { return name_; }

 private:
  const char* name_;
  Fn fns_[kNumDeviceTypes] = {};
};

template <class Fn>
struct KernelRegistrar {
  KernelRegistrar(DispatchStub<Fn>& stub, DeviceType d, Fn fn) { stub.set(d, fn); }
};

}  // namespace ember
