// CPU kernels of the shape ops: remap (flip, roll, pad, repeat) and tril/triu. Both only move
// bytes, so they are instantiated per element size.
#include <cstring>

#include "ember/core/cpu/line_loop.h"
#include "ember/core/ops/shape_ops.h"

namespace ember::cpu {
namespace {

// A run of the last dim's table whose entries advance by a constant step (one memcpy-like
// copy when the step is 1), or a run of fills.
struct Segment {
  int64_t begin, len, src, step;
  bool fill;
};

std::vector<Segment> segments(const int64_t* table, int64_t n) {
  std::vector<Segment> segs;
  for (int64_t j = 0; j < n; ++j) {
    int64_t t = table[j];
    bool fill = t == kRemapFill;
    if (!segs.empty() && segs.back().fill == fill) {
      Segment& s = segs.back();
      if (fill || t == s.src + s.len * s.step) {
        ++s.len;
        continue;
      }
      if (s.len == 1) {
        s.step = t - s.src;
        ++s.len;
        continue;
      }
    }
    segs.push_back({j, 1, fill ? 0 : t, 0, fill});
  }
  return segs;
}

template <class U>
void remap_rows(const Tensor& out, const Tensor& in, const int64_t* offsets, U fill) {
  const int64_t nd = out.dim(), inner = out.size(nd - 1), rows = out.numel() / inner;
  IntArrayRef sizes = out.sizes();
  DimVector table_start(nd, 0);  // where each dim's table begins in `offsets`
  for (int64_t d = 1; d < nd; ++d) table_start[d] = table_start[d - 1] + sizes[d - 1];
  const std::vector<Segment> segs = segments(offsets + table_start[nd - 1], inner);
  const U* src = static_cast<const U*>(in.data_ptr());
  U* dst = static_cast<U*>(out.data_ptr());
  parallel_for(0, rows, std::max<int64_t>(1, 32768 / inner), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      U* row = dst + r * inner;
      int64_t base = 0, rest = r;
      bool fill_row = false;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t t = offsets[table_start[d] + rest % sizes[d]];
        rest /= sizes[d];
        fill_row = fill_row || t == kRemapFill;
        base += t;
      }
      if (fill_row) {
        std::fill_n(row, inner, fill);
        continue;
      }
      for (const Segment& s : segs) {
        U* o = row + s.begin;
        const U* i = src + base + s.src;
        if (s.fill)
          std::fill_n(o, s.len, fill);
        else if (s.step == 1)
          std::copy_n(i, s.len, o);
        else
          for (int64_t k = 0; k < s.len; ++k) o[k] = i[k * s.step];
      }
    }
  });
}

void remap_kernel(const Tensor& out, const Tensor& in, const Tensor& offsets, const Scalar& fill) {
  uint64_t fill_bits = 0;
  visit_dtype(out.dtype(), [&](auto tag) {
    auto v = fill.to<decltype(tag)>();
    std::memcpy(&fill_bits, &v, sizeof(v));
  });
  visit_element_size(out.element_size(), [&](auto tag) {
    using U = decltype(tag);
    U f;
    std::memcpy(&f, &fill_bits, sizeof(U));
    remap_rows<U>(out, in, offsets.contiguous().data_ptr<int64_t>(), f);
  });
}

// Rows of the (batched) matrices: row r of batch b keeps columns [lo, hi) and zeros the rest.
template <class U>
void tri_rows(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper) {
  const int64_t nd = in.dim(), R = in.size(-2), C = in.size(-1), rs = in.stride(-2), cs = in.stride(-1);
  const U* src = static_cast<const U*>(in.data_ptr());
  U* dst = static_cast<U*>(out.data_ptr());
  parallel_for(0, out.numel() / C, std::max<int64_t>(1, 32768 / C), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t r = row % R, base = r * rs;
      for (int64_t d = nd - 3, rest = row / R; d >= 0; --d) {
        base += rest % in.size(d) * in.stride(d);
        rest /= in.size(d);
      }
      int64_t edge = std::clamp<int64_t>(r + diagonal + (upper ? 0 : 1), 0, C);
      int64_t lo = upper ? edge : 0, hi = upper ? C : edge;
      U* o = dst + row * C;
      std::fill_n(o, lo, U{});
      for (int64_t c = lo; c < hi; ++c) o[c] = src[base + c * cs];
      std::fill_n(o + hi, C - hi, U{});
    }
  });
}

void tri_kernel(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper) {
  visit_element_size(out.element_size(),
                     [&](auto tag) { tri_rows<decltype(tag)>(out, in, diagonal, upper); });
}

KernelRegistrar<RemapFn> reg_remap(remap_stub, kCPU, &remap_kernel);
KernelRegistrar<TriFn> reg_tri(tri_stub, kCPU, &tri_kernel);

}  // namespace
}  // namespace ember::cpu
