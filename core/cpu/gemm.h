#pragma once

// The CPU matrix product behind matmul, bmm and the convolutions: c = alpha * a @ b + beta * c on
// raw strided matrices, through Eigen built once per x86 ISA level and picked at run time
// (matmul_kernel*.cpp).

#include <cstdint>

namespace ember::cpu {

// A rows x cols matrix at `data`; element (i, j) is data[i * row_stride + j * col_stride].
template <class T>
struct MatrixRef {
  T* data;
  int64_t rows, cols;
  int64_t row_stride, col_stride;
};

// T is float, double or int64_t. a and b need a unit stride along their rows or their columns
// (pack them otherwise; see unit_stride); c needs col_stride 1. beta == 0 overwrites c without
// reading it. Eigen uses the OpenMP threads unless the call is already inside a parallel region.
template <class T>
void gemm(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, T alpha, T beta);

// Whether `batch` independent products of `flops` each should run one per thread (Eigen
// single-threaded inside) rather than one at a time on all of Eigen's threads.
bool parallel_over_batch(int64_t batch, double flops);

// Whether gemm can read m in place: a unit stride along one of its dims. Rewrites the stride of a
// dim of size 1 (which no read uses) so that the other dim qualifies.
template <class T>
bool unit_stride(MatrixRef<T>& m) {
  if (m.cols <= 1) m.col_stride = 1;
  if (m.rows <= 1) m.row_stride = m.col_stride == 1 ? m.cols : 1;
  return m.col_stride == 1 || m.row_stride == 1;
}

}  // namespace ember::cpu
