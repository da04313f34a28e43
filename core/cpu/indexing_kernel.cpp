// CPU kernels of the indexing ops. gather walks the output in order (a pure read, so any split
// among threads works); scatter walks lines along dim, each line in one thread, so writes through
// repeated indices never race and land in index order.
#include <algorithm>

#include "ember/core/cpu/line_loop.h"
#include "ember/core/ops/indexing.h"

namespace ember::cpu {
namespace {

void gather_kernel(const char*, const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const int64_t step = self.stride(dim) * static_cast<int64_t>(self.element_size());
  ElementwiseIter it({out, restride(self, index.sizes(), dim), index});
  visit_element_size(out.element_size(), [&](auto tag) {
    using U = decltype(tag);
    it.for_each([&](char** p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t k = *reinterpret_cast<const int64_t*>(p[2] + i * st[2]);
        *reinterpret_cast<U*>(p[0] + i * st[0]) = *reinterpret_cast<const U*>(p[1] + i * st[1] + k * step);
      }
    });
  });
}

// self[.., index[.., i, ..], ..] = combine(that, src[.., i, ..]) along each line.
template <class T, class Combine>
void scatter_lines(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Combine combine) {
  const int64_t len = index.size(dim);
  const int64_t self_step = self.stride(dim) * static_cast<int64_t>(sizeof(T));
  const int64_t index_step = index.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
  const int64_t src_step = src.stride(dim) * static_cast<int64_t>(sizeof(T));
  Tensor src_view = src.as_strided(index.sizes(), src.strides());
  for_each_line(
      dim, len,
      [&](char** p, const int64_t* st, int64_t lines) {
        for_each_step(lines, len, st[0] < self_step, [&](int64_t j, int64_t i) {
          int64_t k = *reinterpret_cast<const int64_t*>(p[1] + j * st[1] + i * index_step);
          T& dst = *reinterpret_cast<T*>(p[0] + j * st[0] + k * self_step);
          combine(dst, *reinterpret_cast<const T*>(p[2] + j * st[2] + i * src_step));
        });
      },
      restride(self, index.sizes(), dim), index, src_view);
}

void scatter_kernel(const char*, ScatterOp op, const Tensor& self, int64_t dim, const Tensor& index,
                    const Tensor& src, const Scalar& alpha) {
  if (op == ScatterOp::Assign) {
    visit_element_size(self.element_size(), [&](auto tag) {
      using U = decltype(tag);
      scatter_lines<U>(self, dim, index, src, [](U& dst, U v) { dst = v; });
    });
    return;
  }
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = ComputeType<T>;
    const A a = alpha.to<A>();
    scatter_lines<T>(self, dim, index, src,
                     [a](T& dst, T v) { dst = static_cast<T>(static_cast<A>(dst) + a * static_cast<A>(v)); });
  });
}

IndexRange index_range_kernel(const char*, const Tensor& index) {
  constexpr int64_t kChunk = 1 << 16;
  Tensor c = index.contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  const int64_t n = c.numel(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<IndexRange> part(chunks);
  parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      auto [lo, hi] = std::minmax_element(p + k * kChunk, p + std::min(n, (k + 1) * kChunk));
      part[k] = {*lo, *hi};
    }
  });
  IndexRange r = part[0];
  for (const IndexRange& q : part) r = {std::min(r.min, q.min), std::max(r.max, q.max)};
  return r;
}

KernelRegistrar<GatherFn> reg_gather(gather_stub, kCPU, &gather_kernel);
KernelRegistrar<ScatterFn> reg_scatter(scatter_stub, kCPU, &scatter_kernel);
KernelRegistrar<IndexRangeFn> reg_index_range(index_range_stub, kCPU, &index_range_kernel);

}  // namespace
}  // namespace ember::cpu
