#pragma once

#include <optional>

#include "ember/core/device.h"
#include "ember/core/dtype.h"

namespace ember {

// What a factory makes: `zeros({2, 3}, kFloat64)`, `ones({4}, TensorOptions().device(kCUDA))`.
struct TensorOptions {
  std::optional<ScalarType> dtype_;  // unset: float32 for factories, inferred by tensor({...})
  Device device_ = Device(kCPU);

  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(DeviceType d) : device_(d) {}

  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  ScalarType dtype() const { return dtype_.value_or(kFloat32); }
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_; }
};

inline TensorOptions dtype(ScalarType t) { return TensorOptions(t); }
inline TensorOptions device(Device d) { return TensorOptions(d); }

}  // namespace ember
