#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

int get_num_threads();
void set_num_threads(int n);

// Splits [begin, end) into one contiguous range per thread when it holds more than `grain`
// items; f(b, e) must not throw (check inputs before the loop).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  if (n > grain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
    int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
    int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks));
#pragma omp parallel num_threads(threads)
    {
      int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  (void)grain;
  f(begin, end);
}

// A sum of `size` values over [begin, end), split as parallel_for splits it: f(b, e, sum) adds
// range [b, e)'s terms into its own zeroed buffer `sum`, and the buffers are added in the order
// of their ranges, so that the result does not depend on the threads' timing.
template <class C, class F>
std::vector<C> parallel_sum(int64_t begin, int64_t end, int64_t grain, size_t size, const F& f) {
  std::map<int64_t, std::vector<C>> sums;  // by the first item of their range
  std::mutex sums_mutex;
  parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    std::vector<C> sum(size, C(0));
    f(b, e, sum);
    std::lock_guard<std::mutex> lock(sums_mutex);
    sums.emplace(b, std::move(sum));
  });
  std::vector<C> total(size, C(0));
  for (size_t i = 0; i < size; ++i)
    for (const auto& [b, sum] : sums) total[i] += sum[i];
  return total;
}

}  // namespace ember
