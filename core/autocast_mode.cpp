#include "ember/core/autocast_mode.h"

#include <algorithm>
#include <unordered_map>

#include "ember/core/autograd_meta.h"
#include "ember/core/error.h"
#include "ember/core/generator.h"
#include "ember/core/grad_mode.h"
#include "ember/core/memory_format.h"
#include "ember/core/tensor.h"
#include "ember/core/type_promotion.h"

namespace ember::amp {
namespace detail {

thread_local constinit bool autocast_pending = false;

}  // namespace detail

namespace {

int index_of(DeviceType d) { return static_cast<int>(d); }

struct CacheKey {
  const TensorImpl* source;
  ScalarType dtype;
  bool operator==(const CacheKey&) const = default;
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    return std::hash<const void*>()(k.source) ^ static_cast<size_t>(k.dtype);
  }
};
struct CacheEntry {
  Tensor source;  // held so its address is not reused by another tensor while the entry lives
  Tensor cast;
};
// A whole buffer of parameters cast at once (nn::utils::flatten_parameters_), by storage.
struct BufferKey {
  const StorageImpl* storage;
  ScalarType dtype;
  bool operator==(const BufferKey&) const = default;
};
struct BufferKeyHash {
  size_t operator()(const BufferKey& k) const {
    return std::hash<const void*>()(k.storage) ^ static_cast<size_t>(k.dtype);
  }
};

struct State {
  bool enabled[kNumDeviceTypes] = {false, false};
  ScalarType dtype[kNumDeviceTypes] = {kBFloat16, kFloat16};  // CPU, CUDA: PyTorch's defaults
  bool cache_enabled = true;
  int nesting = 0;
  std::unordered_map<CacheKey, CacheEntry, CacheKeyHash> cache;
  std::unordered_map<BufferKey, CacheEntry, BufferKeyHash> buffers;
  void clear() {
    cache.clear();
    buffers.clear();
  }
};

State& state() {
  thread_local State s;
  return s;
}

// Whether ops should look at autocast: recomputed whenever a device's switch changes. Inside an
// autocast op (ExcludeAutocastGuard) the guard restores the flag it saw.
void refresh_pending() {
  const State& s = state();
  detail::autocast_pending = s.enabled[0] || s.enabled[1];
}

}  // namespace

bool is_autocast_enabled(DeviceType device_type) { return state().enabled[index_of(device_type)]; }

void set_autocast_enabled(DeviceType device_type, bool enabled) {
  state().enabled[index_of(device_type)] = enabled;
  refresh_pending();
}

ScalarType get_autocast_dtype(DeviceType device_type) { return state().dtype[index_of(device_type)]; }

void set_autocast_dtype(DeviceType device_type, ScalarType dtype) {
  EMBER_CHECK(is_reduced_float(dtype), "autocast: expected dtype float16 or bfloat16 for device type ",
              Device(device_type), ", got ", dtype);
  state().dtype[index_of(device_type)] = dtype;
}

bool is_autocast_cache_enabled() { return state().cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { state().cache_enabled = enabled; }
size_t autocast_cache_size() { return state().cache.size(); }
void clear_autocast_cache() { state().clear(); }

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<ScalarType> dtype, bool enabled,
                             bool cache_enabled)
    : device_type_(device_type),
      prev_enabled_(is_autocast_enabled(device_type)),
      prev_dtype_(get_autocast_dtype(device_type)),
      prev_cache_enabled_(is_autocast_cache_enabled()) {
  if (dtype) set_autocast_dtype(device_type, *dtype);  // checks before anything changes
  ++state().nesting;
  set_autocast_enabled(device_type, enabled);
  set_autocast_cache_enabled(cache_enabled);
}

AutocastGuard::~AutocastGuard() {
  State& s = state();
  if (--s.nesting == 0) s.clear();
  s.dtype[index_of(device_type_)] = prev_dtype_;
  s.cache_enabled = prev_cache_enabled_;
  set_autocast_enabled(device_type_, prev_enabled_);
}

namespace detail {

AutocastPolicy policy_of(std::string_view op) {
  // Built at first use, when every op family has registered its table.
  static const std::unordered_map<std::string_view, AutocastPolicy> policies = [] {
    std::unordered_map<std::string_view, AutocastPolicy> m;
    for (const OpSchema& s : registered_ops()) m.emplace(s.name, s.autocast);
    return m;
  }();
  auto it = policies.find(op);
  EMBER_CHECK(it != policies.end(), "autocast: op '", op, "' is not in the op registry");
  return it->second;
}

// Eligible inputs, as PyTorch's is_eligible: floating, and not float64 (kept as asked for).
bool eligible(ScalarType t) { return is_floating_point(t) && t != kFloat64; }

std::optional<ScalarType> target_dtype(AutocastPolicy policy, DeviceType device_type,
                                       const std::vector<ScalarType>& dtypes) {
  const State& s = state();
  if (!s.enabled[index_of(device_type)]) return std::nullopt;
  switch (policy) {
    case AutocastPolicy::LowerPrecision:
      return s.dtype[index_of(device_type)];
    case AutocastPolicy::Float32:
      return kFloat32;
    case AutocastPolicy::Promote: {
      std::optional<ScalarType> widest;
      for (ScalarType t : dtypes)
        if (eligible(t)) widest = widest ? promote_types(*widest, t) : t;
      return widest;
    }
    case AutocastPolicy::None:
      break;
  }
  return std::nullopt;
}

namespace {

// `data` (made under no_grad from a cast of t) recorded as t's cast: the gradient goes back to t as
// from t.to(dtype).
Tensor recorded_as_cast(const Tensor& t, const Tensor& data) {
  record("clone", {t}, {data}, [](const GradContext& g) -> std::vector<Tensor> { return {g.grad()}; });
  return data;
}

// A leaf that is a slice of a larger buffer (nn::utils::flatten_parameters_): the first one cast
// casts the whole buffer (one kernel), and each is then its slice of that.
Tensor slice_of_cast_buffer(std::unordered_map<BufferKey, CacheEntry, BufferKeyHash>& buffers,
                            const Tensor& t, ScalarType dtype) {
  const StorageImpl* storage = t.unsafe_impl()->storage().get();
  const BufferKey key{storage, dtype};
  Tensor out;
  {
    NoGradGuard no_grad;
    auto it = buffers.find(key);
    if (it == buffers.end()) {  // entered once the cast succeeded (it may run out of memory)
      const auto n = static_cast<int64_t>(storage->nbytes() / element_size(t.dtype()));
      it = buffers.emplace(key, CacheEntry{t, t.detach().as_strided({n}, {1}, 0).to(dtype)}).first;
    }
    out = it->second.cast.as_strided(t.sizes(), t.strides(), t.storage_offset());
  }
  return recorded_as_cast(t, out);
}

thread_local std::vector<detail::KeptCastUse>* kept_cast_uses = nullptr;  // a capture's record

bool capturing() { return default_generator(kCUDA).capturing(); }

// The kept cast of t to dtype, if it was made from t's present value. A capture that records its
// uses may read it (the graph's replays refresh it); one that does not would go on reading a
// copy that changes made to the parameter outside the graph never reach.
const Tensor* current_kept_cast(const Tensor& t, ScalarType dtype) {
  const AutogradMeta* meta = t.unsafe_impl()->autograd_meta();
  if (!meta || !meta->kept_cast.copy.defined() || (capturing() && !kept_cast_uses)) return nullptr;
  const AutogradMeta::KeptCast& k = meta->kept_cast;
  const bool current = k.copy.dtype() == dtype && k.storage == t.unsafe_impl()->storage().get() &&
                       k.storage_offset == t.storage_offset() && k.version == t._version() &&
                       k.copy.device() == t.device() && k.copy.sizes().equals(t.sizes());
  return current ? &k.copy : nullptr;
}

// A kept cast the capture reads or writes; returns it.
const Tensor& used(const Tensor& t, const Tensor& copy) {
  if (kept_cast_uses && capturing()) {
    auto same = [&](const detail::KeptCastUse& u) { return u.param.unsafe_impl() == t.unsafe_impl(); };
    if (std::none_of(kept_cast_uses->begin(), kept_cast_uses->end(), same))
      kept_cast_uses->push_back({t, copy});
  }
  return copy;
}

void set_kept_cast(const Tensor& t, const Tensor& copy) {
  AutogradMeta::KeptCast& k = t.unsafe_impl()->autograd_meta()->kept_cast;
  k.copy = copy;
  k.storage = t.unsafe_impl()->storage().get();
  k.storage_offset = t.storage_offset();
  k.version = t._version();
}

}  // namespace

Tensor cast(const Tensor& t, DeviceType device_type, ScalarType dtype) {
  if (!t.defined() || t.device().type != device_type || !eligible(t.dtype()) || t.dtype() == dtype) return t;
  State& s = state();
  // PyTorch's cached_cast: only lower-precision casts of float32 leaves that require grad.
  const bool cacheable = s.cache_enabled && t.dtype() == kFloat32 &&
                         dtype == s.dtype[index_of(device_type)] && t.requires_grad() && t.is_leaf();
  if (!cacheable) return t.to(dtype);
  CacheKey key{t.unsafe_impl(), dtype};
  if (auto it = s.cache.find(key); it != s.cache.end()) return it->second.cast;
  Tensor out;
  if (const Tensor* kept = current_kept_cast(t, dtype)) {
    {
      NoGradGuard no_grad;
      const Tensor& copy = used(t, *kept);
      out = copy.as_strided(copy.sizes(), copy.strides(), copy.storage_offset());
    }
    out = recorded_as_cast(t, out);
  } else {
    const StorageImpl* storage = t.unsafe_impl()->storage().get();
    const bool in_buffer = storage->nbytes() > static_cast<size_t>(t.numel()) * element_size(t.dtype());
    out = in_buffer ? slice_of_cast_buffer(s.buffers, t, dtype) : t.to(dtype);
    if (t.unsafe_impl()->autograd_meta()->kept_cast.wanted && !capturing()) set_kept_cast(t, out.detach());
  }
  s.cache.emplace(key, CacheEntry{t, out});
  return out;
}

Tensor kept_cast(const Tensor& param) {
  AutogradMeta* meta = param.unsafe_impl()->autograd_meta();
  if (!meta || !param.is_leaf() || param.dtype() != kFloat32) return {};
  meta->kept_cast.wanted = true;
  const Tensor& copy = meta->kept_cast.copy;
  if (!copy.defined()) return {};
  const Tensor* current = current_kept_cast(param, copy.dtype());
  return current && same_dense_layout(*current, param) ? used(param, *current) : Tensor();
}

void kept_cast_written(const Tensor& param) {
  AutogradMeta::KeptCast& k = param.unsafe_impl()->autograd_meta()->kept_cast;
  k.version = param._version();
}

void record_kept_casts(std::vector<KeptCastUse>* uses) { kept_cast_uses = uses; }

void refresh_kept_cast(const KeptCastUse& use) {
  const Tensor* current = current_kept_cast(use.param, use.copy.dtype());
  if (current && current->data_ptr() == use.copy.data_ptr()) return;
  {
    NoGradGuard no_grad;
    use.copy.copy_(use.param);
  }
  set_kept_cast(use.param, use.copy);
}

}  // namespace detail
}  // namespace ember::amp
