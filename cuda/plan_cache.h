#pragma once

// A thread-safe cache of library plans (cuBLASLt heuristic picks, cuDNN algorithms) keyed by a
// problem's numbers: shapes, strides, dtypes, alignments, flags.
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace ember::cuda::detail {

template <size_t N, class Value>
class PlanCache {
 public:
  using Key = std::array<int64_t, N>;

  std::optional<Value> find(const Key& k) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(k);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  void insert(const Key& k, const Value& v) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.insert_or_assign(k, v);
  }

 private:
  struct Hash {
    size_t operator()(const Key& k) const {
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the numbers
      for (int64_t x : k) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  std::mutex mutex_;
  std::unordered_map<Key, Value, Hash> map_;
};

}  // namespace ember::cuda::detail
