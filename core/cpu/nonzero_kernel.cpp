// nonzero's CPU kernel: each selected element writes its coordinates in the row its running
// count gives it.
#include "ember/core/ops/nonzero.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

void nonzero_kernel(const Tensor& out, const Tensor& count, IntArrayRef sizes) {
  const int64_t* c = count.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t dims = static_cast<int64_t>(sizes.size());
  parallel_for(0, count.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c[i] == (i > 0 ? c[i - 1] : 0)) continue;
      int64_t* row = o + (c[i] - 1) * dims;
      int64_t rest = i;
      for (int64_t d = dims - 1; d >= 0; --d) row[d] = rest % sizes[d], rest /= sizes[d];
    }
  });
}

KernelRegistrar<NonzeroFn> reg_nonzero(nonzero_stub, kCPU, &nonzero_kernel);

}  // namespace
}  // namespace ember::cpu
