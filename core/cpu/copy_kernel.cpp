#include <cstring>

#include "ember/core/copy.h"
#include "ember/core/cpu/elementwise_loop.h"

namespace ember::cpu {
namespace {

void copy_kernel(const Tensor& dst, const Tensor& src, bool) {
  EMBER_CHECK(dst.is_cpu() && src.is_cpu(), "copy_: CPU kernel got ", src.device(), " -> ", dst.device());
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() &&
      dst.sizes().equals(src.sizes())) {
    if (dst.data_ptr() != src.data_ptr()) std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  ElementwiseIter it({dst, src});
  visit_dtype(dst.dtype(), [&](auto d) {
    using D = decltype(d);
    visit_dtype(src.dtype(), [&](auto s) {
      using S = decltype(s);
      it.for_each([](char** p, const int64_t* st, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<D*>(p[0] + i * st[0]) =
              static_cast<D>(*reinterpret_cast<const S*>(p[1] + i * st[1]));
      });
    });
  });
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  ElementwiseIter it({dst});
  visit_dtype(dst.dtype(), [&](auto d) {
    using D = decltype(d);
    D v = value.to<D>();
    it.for_each([v](char** p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<D*>(p[0] + i * st[0]) = v;
    });
  });
}

KernelRegistrar<CopyFn> reg_copy(copy_stub, kCPU, &copy_kernel);
KernelRegistrar<FillFn> reg_fill(fill_stub, kCPU, &fill_kernel);

}  // namespace
}  // namespace ember::cpu
