#pragma once

// Autocast (torch.autocast): thread-local mixed-precision state, per device type. While a region is
// active for a device, every op whose schema has an autocast policy (core/op_registry.h) casts its
// floating inputs on that device at its entry, then runs with autocast off inside (its internal
// ops use the dtypes it chose):
//
//   { amp::AutocastGuard autocast(kCUDA, kBFloat16);
//     Tensor loss = criterion(model(x), y); }  // linear in bf16, the loss in float32
//   loss.backward();                           // each op's backward runs in the dtype it used
//
// Casts are ordinary differentiable copies, so gradients reach float32 parameters in float32.
// Inside the outermost region, the lower-precision cast of a float32 leaf that requires grad (a
// parameter) is cached and reused; the cache is cleared when that region exits.
//
// Kept casts: once a fused optimizer step (optim::Adam, AdamW, SGD with fused) has updated a
// parameter, autocast's cast of it is kept with the parameter beyond the region, and the fused
// steps write it in the same pass as the parameter. A region then uses it as the cast while the
// parameter's version says nothing else changed it since: in a steady training loop no parameter
// is cast at all. It costs the copy's memory (2 bytes an element) for as long as the parameter
// lives or keeps its data (set_data drops it); any other change to the parameter (an unfused step,
// load_state_dict, an in-place op) makes the next region cast it again.

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ember/core/device.h"
#include "ember/core/dtype.h"
#include "ember/core/op_registry.h"
#include "ember/core/tensor.h"

namespace ember::amp {

bool is_autocast_enabled(DeviceType device_type);
void set_autocast_enabled(DeviceType device_type, bool enabled);
// The lower-precision dtype of the device's regions: float16 for CUDA, bfloat16 for the CPU unless set.
ScalarType get_autocast_dtype(DeviceType device_type);
// float16 or bfloat16; throws otherwise.
void set_autocast_dtype(DeviceType device_type, ScalarType dtype);
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
// The number of casts the cache holds (for tests), and clearing it (torch.clear_autocast_cache).
size_t autocast_cache_size();
void clear_autocast_cache();

// A scoped region, as `with torch.autocast(device_type, dtype, enabled, cache_enabled)`: sets the
// device type's state on entry and restores the previous one on exit. Regions nest; `enabled =
// false` turns autocast off inside. Without a dtype, the device type's current one is kept.
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device_type, std::optional<ScalarType> dtype = std::nullopt,
                         bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool prev_enabled_;
  ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

namespace detail {

// True when some device type has autocast on and no autocast op is running on this thread: the
// one check an op frontend makes when autocast is off.
extern thread_local constinit bool autocast_pending;

// Runs fn with autocast off (an op's body, or the backward pass), restoring it afterwards.
class ExcludeAutocastGuard {
 public:
  ExcludeAutocastGuard() : prev_(autocast_pending) { autocast_pending = false; }
  ~ExcludeAutocastGuard() { autocast_pending = prev_; }
  ExcludeAutocastGuard(const ExcludeAutocastGuard&) = delete;
  ExcludeAutocastGuard& operator=(const ExcludeAutocastGuard&) = delete;

 private:
  bool prev_;
};

// The autocast policy of a registered op (from its OpSchema); throws for an unknown name.
AutocastPolicy policy_of(std::string_view op);

// The dtype an op of `policy` runs in given its floating inputs' dtypes on `device_type`, or
// nullopt when autocast is off there or there is nothing to cast.
std::optional<ScalarType> target_dtype(AutocastPolicy policy, DeviceType device_type,
                                       const std::vector<ScalarType>& dtypes);
// `t` cast to `dtype` if it is an eligible input (floating, not float64, on `device_type`).
Tensor cast(const Tensor& t, DeviceType device_type, ScalarType dtype);

// For the fused optimizer steps (kept casts, above). kept_cast: `param`'s kept cast if it was made
// from param's present value (else undefined), and from now on param's casts are kept.
// kept_cast_written: the step has written param and its kept cast alike; the cast is current again.
Tensor kept_cast(const Tensor& param);
void kept_cast_written(const Tensor& param);

// Kept casts in CUDA graphs (cuda::CUDAGraph). While a capture records into `uses` on this thread,
// regions read and fused steps write the current kept casts as eagerly, and each (parameter, kept
// cast) the capture touches is added to `uses` once; no kept cast is made during a capture, and a
// capture that does not record uses none. Replays then read and write those copies, not the
// parameter's cast: before each replay, refresh_kept_cast makes `copy` the parameter's kept cast
// again, cast anew if the parameter changed outside the graph.
struct KeptCastUse {
  Tensor param;
  Tensor copy;
};
void record_kept_casts(std::vector<KeptCastUse>* uses);  // nullptr: stop recording
void refresh_kept_cast(const KeptCastUse& use);

// The tensors among an op's arguments: a Tensor, a list of them, or anything else (passed through).
template <class F>
void for_each_tensor(const Tensor& t, F&& f) {
  if (t.defined()) f(t);
}
template <class F>
void for_each_tensor(ArrayRef<Tensor> ts, F&& f) {
  for (const Tensor& t : ts)
    if (t.defined()) f(t);
}
template <class F>
void for_each_tensor(const std::vector<Tensor>& ts, F&& f) {
  for_each_tensor(ArrayRef<Tensor>(ts), f);
}
template <class T, class F>
void for_each_tensor(const T&, F&&) {}

inline Tensor cast_arg(const Tensor& t, DeviceType d, ScalarType s) { return cast(t, d, s); }
inline std::vector<Tensor> cast_arg(ArrayRef<Tensor> ts, DeviceType d, ScalarType s) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cast(t, d, s));
  return out;
}
inline std::vector<Tensor> cast_arg(const std::vector<Tensor>& ts, DeviceType d, ScalarType s) {
  return cast_arg(ArrayRef<Tensor>(ts), d, s);
}
template <class T>
const T& cast_arg(const T& v, DeviceType, ScalarType) {
  return v;
}

}  // namespace detail

// How an op frontend applies its policy (DESIGN.md, "Calling an op"):
//
//   Tensor mm(const Tensor& a, const Tensor& b) {
//     if (amp::detail::autocast_pending) return amp::autocast_call("mm", AMP_FN(mm), a, b);
//     ...
//
// The policy is the op's registry entry (`op` names it). The op's device type is its first
// tensor's; its eligible inputs are cast by the policy, then `fn` runs with autocast off, so it
// does not cast again and its internal ops keep the chosen dtypes.
template <class F, class... Args>
decltype(auto) autocast_call(std::string_view op, F&& fn, const Args&... args) {
  const AutocastPolicy policy = detail::policy_of(op);
  std::optional<DeviceType> device_type;
  std::vector<ScalarType> dtypes;
  auto collect = [&](const Tensor& t) {
    if (!device_type) device_type = t.device().type;
    dtypes.push_back(t.dtype());
  };
  (detail::for_each_tensor(args, collect), ...);
  detail::ExcludeAutocastGuard exclude;
  std::optional<ScalarType> target =
      device_type ? detail::target_dtype(policy, *device_type, dtypes) : std::nullopt;
  if (!target) return fn(args...);
  return fn(detail::cast_arg(args, *device_type, *target)...);
}

}  // namespace ember::amp
