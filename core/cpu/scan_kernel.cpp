// CPU cumsum: each thread takes whole lines along dim, accumulating in double (floats) or int64.
#include "ember/core/cpu/line_loop.h"
#include "ember/core/ops/scan.h"

namespace ember::cpu {
namespace {

void cumsum_kernel(const Tensor& out, const Tensor& in, int64_t dim) {
  const int64_t len = in.size(dim);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<is_floating_point(dtype_of<T>), double, int64_t>;
    const int64_t out_step = out.stride(dim) * static_cast<int64_t>(sizeof(T));
    const int64_t in_step = in.stride(dim) * static_cast<int64_t>(sizeof(T));
    for_each_line(
        dim, len,
        [&](char** p, const int64_t* st, int64_t lines) {
          std::vector<Acc> acc(lines, Acc(0));
          for_each_step(lines, len, st[1] < in_step, [&](int64_t j, int64_t i) {
            acc[j] += static_cast<Acc>(*reinterpret_cast<const T*>(p[1] + j * st[1] + i * in_step));
            *reinterpret_cast<T*>(p[0] + j * st[0] + i * out_step) = static_cast<T>(acc[j]);
          });
        },
        out, in);
  });
}

KernelRegistrar<CumsumFn> reg_cumsum(cumsum_stub, kCPU, &cumsum_kernel);

}  // namespace
}  // namespace ember::cpu
