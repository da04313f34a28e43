#pragma once

// Loops for the CPU kernels that move data along one dim (indexing, sorting, scans): lines along
// a dim and the order of their steps.

#include "ember/core/cpu/elementwise_loop.h"

namespace ember::cpu {

// The type CPU kernels compute a stored T in (as visit_compute_type): float for the 16-bit floats
// and float, double, int64 for the integers and bool.
template <class T>
using ComputeType = std::conditional_t<std::is_same_v<T, double>, double,
                                       std::conditional_t<is_floating_point(dtype_of<T>), float, int64_t>>;

// `t` viewed over `sizes` (at most t's sizes, any size along dim) with stride 0 along dim: the
// first element of each line, for kernels that step along dim by a computed amount.
inline Tensor restride(const Tensor& t, IntArrayRef sizes, int64_t dim) {
  DimVector strides(t.strides());
  strides[dim] = 0;
  return t.as_strided(sizes, strides);
}

inline Tensor drop_dim(const Tensor& t, int64_t dim) {
  DimVector sizes(t.sizes()), strides(t.strides());
  sizes.erase(dim);
  strides.erase(dim);
  return t.as_strided(sizes, strides);
}

// Cuts operands of one shape (apart from their sizes along dim) into lines along `dim`:
// fn(ptrs, strides, m) gets m lines, the j-th of operand k starting at ptrs[k] + j * strides[k]
// bytes. A line goes to one thread whole, so a kernel that writes only within its lines never races.
template <class F, class... T>
void for_each_line(int64_t dim, int64_t line_len, const F& fn, const T&... operands) {
  ElementwiseIter it({drop_dim(operands, dim)...});
  it.for_each(fn, std::max<int64_t>(1, 32768 / std::max<int64_t>(line_len, 1)));
}

// Visits f(j, i) for line j < lines and step i < len, steps outermost when `lines_inner` (when
// neighbouring lines are closer in memory than neighbouring steps), so memory is walked in order.
template <class F>
void for_each_step(int64_t lines, int64_t len, bool lines_inner, const F& f) {
  if (lines_inner) {
    for (int64_t i = 0; i < len; ++i)
      for (int64_t j = 0; j < lines; ++j) f(j, i);
  } else {
    for (int64_t j = 0; j < lines; ++j)
      for (int64_t i = 0; i < len; ++i) f(j, i);
  }
}

}  // namespace ember::cpu
