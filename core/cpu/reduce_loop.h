#pragma once

// The CPU reduction geometry: an input's dims split into kept dims (one output element each)
// and reduced dims, each group sorted outermost-first by input stride and coalesced, so that
// the last dim of each group is the one that walks memory fastest.

#include "ember/core/tensor.h"

namespace ember::cpu {

struct ReduceGeometry {
  // `out` has in's rank with the dims in `mask` of size 1. With keep_reduced_order, the reduced
  // dims are only coalesced, so a reduced position is the row-major index over them.
  ReduceGeometry(const Tensor& out, const Tensor& in, uint64_t mask, bool keep_reduced_order);

  // Kept dims: sizes, input strides, output strides (elements); at least one dim.
  DimVector kept_sizes, kept_in, kept_out;
  // Reduced dims: sizes and input strides; at least one dim (a single 0 when empty).
  DimVector red_sizes, red_in;
  int64_t n_out = 1, n_red = 1;

  int64_t inner_kept() const { return kept_sizes.back(); }
  int64_t inner_red() const { return red_sizes.back(); }

  // Input and output offsets of the k-th row of kept elements (all kept dims but the inner).
  void kept_row_offsets(int64_t k, int64_t& in_off, int64_t& out_off) const;

  // Calls f(in_offset, r, n) for each run of n <= max_len reduced elements along the inner
  // reduced dim that covers the reduced positions [r0, r1) (r counts in sorted order).
  template <class F>
  void for_each_segment(int64_t r0, int64_t r1, int64_t max_len, const F& f) const {
    const int64_t len = inner_red();
    const int nd = static_cast<int>(red_sizes.size());
    for (int64_t r = r0; r < r1;) {
      int64_t pos = r % len, rest = r / len, off = pos * red_in[nd - 1];
      for (int d = nd - 2; d >= 0; --d) {
        off += rest % red_sizes[d] * red_in[d];
        rest /= red_sizes[d];
      }
      int64_t n = std::min({len - pos, r1 - r, max_len});
      f(off, r, n);
      r += n;
    }
  }
};

// Reads rows x cols elements of dtype `src` at p + (i * row_stride + j * col_stride) elements
// into buf[i * cols + j] as C; contiguous runs take a vectorizable loop.
template <class C>
void load_tile(const void* p, ScalarType src, int64_t rows, int64_t row_stride, int64_t cols,
               int64_t col_stride, C* buf) {
  if (rows > 1 && row_stride == cols * col_stride) {  // the tile is one strided run
    cols *= rows;
    rows = 1;
  }
  visit_dtype(src, [&](auto tag) {
    using S = decltype(tag);
    const S* base = static_cast<const S*>(p);
    for (int64_t i = 0; i < rows; ++i) {
      const S* row = base + i * row_stride;
      C* dst = buf + i * cols;
      if (col_stride == 1) {
        for (int64_t j = 0; j < cols; ++j) dst[j] = static_cast<C>(row[j]);
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = static_cast<C>(row[j * col_stride]);
      }
    }
  });
}

}  // namespace ember::cpu
