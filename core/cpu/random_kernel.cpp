#include "ember/core/cpu/elementwise_loop.h"
#include "ember/core/random.h"
#include "ember/core/random_draw.h"

namespace ember::cpu {
namespace {

// Element i's value is random_draw::fill_block's (core/random_draw.h), which the CUDA kernel
// computes too: each thread fills its range block by block.
void random_kernel(const Tensor& out, RandomKind kind, PhiloxState s, double a, double b) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const int64_t k = random_draw::block_size<C>(kind);
    T* p = static_cast<T*>(out.data_ptr());
    parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end;) {
        const int first = static_cast<int>(i % k), last = static_cast<int>(std::min(k, first + end - i));
        random_draw::fill_block<T, C>(kind, s, a, b, static_cast<uint64_t>(i / k), first, last, p + i);
        i += last - first;
      }
    });
  });
}

KernelRegistrar<RandomFn> reg(random_stub, kCPU, &random_kernel);

}  // namespace
}  // namespace ember::cpu
