#include "ember/core/factories.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

void range_kernel(const Tensor& out, double start, double end, double step, int64_t half) {
  const int64_t n = out.numel();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(out.data_ptr());
    parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t stop) {
      for (int64_t i = begin; i < stop; ++i)
        p[i] = static_cast<T>(i < half ? start + step * static_cast<double>(i)
                                       : end - step * static_cast<double>(n - 1 - i));
    });
  });
}

KernelRegistrar<RangeFn> reg(range_stub, kCPU, &range_kernel);

}  // namespace
}  // namespace ember::cpu
