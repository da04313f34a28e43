#pragma once

#include <optional>

#include "ember/core/device.h"
#include "ember/core/dtype.h"
#include "ember/core/memory_format.h"

namespace ember {

// What a factory makes: `zeros({2, 3}, kFloat64)`, `ones({4}, TensorOptions().device(kCUDA))`,
// `empty({n, c, h, w}, TensorOptions().memory_format(MemoryFormat::ChannelsLast))`.
struct TensorOptions {
  std::optional<ScalarType> dtype_;  // unset: float32 for factories, inferred by tensor({...})
  Device device_ = Device(kCPU);
  std::optional<MemoryFormat> memory_format_;  // unset: Contiguous for factories, Preserve for *_like, to

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
  TensorOptions memory_format(std::optional<MemoryFormat> f) const {
    TensorOptions o = *this;
    o.memory_format_ = f;
    return o;
  }
  ScalarType dtype() const { return dtype_.value_or(kFloat32); }
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_; }
  std::optional<MemoryFormat> memory_format_opt() const { return memory_format_; }
};

inline TensorOptions dtype(ScalarType t) { return TensorOptions(t); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions memory_format(MemoryFormat f) { return TensorOptions().memory_format(f); }

}  // namespace ember
