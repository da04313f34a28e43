#pragma once

#include <algorithm>
#include <cstdint>

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

}  // namespace ember
