// CPU sort kernel: each line is copied into (key, index) pairs, ordered by key with NaN largest
// and ties by index (a strict total order, so std::sort is as stable as stable_sort), then the
// first k are written back. Keys are float (f32, f16, bf16), double, or int64 (integers, bool).
#include <cmath>

#include "ember/core/cpu/line_loop.h"
#include "ember/core/ops/sorting.h"

namespace ember::cpu {
namespace {

template <class K>
struct Order {
  bool descending;
  bool operator()(const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b) const {
    if (a.first == b.first || (is_nan(a.first) && is_nan(b.first))) return a.second < b.second;
    bool less = is_nan(b.first) || a.first < b.first;
    return less != descending;
  }
  static bool is_nan(K v) {
    if constexpr (std::is_floating_point_v<K>) return std::isnan(v);
    return false;
  }
};

// Puts the first k of `line` (by Order) in front: sorted, or in any order.
template <class K>
void order_line(std::vector<std::pair<K, int64_t>>& line, int64_t k, bool descending, bool sorted) {
  Order<K> order{descending};
  auto first = line.begin(), last = line.end();
  auto n = static_cast<int64_t>(line.size());
  if (k == n)
    std::sort(first, last, order);
  else if (sorted)
    std::partial_sort(first, first + k, last, order);
  else
    std::nth_element(first, first + k, last, order);
}

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim, int64_t k,
                 bool descending, bool sorted) {
  const int64_t n = self.size(dim);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using K = ComputeType<T>;
    const int64_t value_step = values.stride(dim) * static_cast<int64_t>(sizeof(T));
    const int64_t index_step = indices.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
    const int64_t self_step = self.stride(dim) * static_cast<int64_t>(sizeof(T));
    for_each_line(
        dim, n,
        [&](char** p, const int64_t* st, int64_t lines) {
          std::vector<std::pair<K, int64_t>> line(n);
          for (int64_t j = 0; j < lines; ++j) {
            const char* in = p[2] + j * st[2];
            for (int64_t i = 0; i < n; ++i)
              line[i] = {static_cast<K>(*reinterpret_cast<const T*>(in + i * self_step)), i};
            order_line(line, k, descending, sorted);
            for (int64_t i = 0; i < k; ++i) {
              *reinterpret_cast<T*>(p[0] + j * st[0] + i * value_step) = static_cast<T>(line[i].first);
              *reinterpret_cast<int64_t*>(p[1] + j * st[1] + i * index_step) = line[i].second;
            }
          }
        },
        values, indices, self);
  });
}

KernelRegistrar<SortFn> reg_sort(sort_stub, kCPU, &sort_kernel);

}  // namespace
}  // namespace ember::cpu
