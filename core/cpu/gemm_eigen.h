#pragma once

// The Eigen body of gemm(), included by matmul_kernel.cpp (baseline ISA) and by
// matmul_kernel_avx2.cpp / matmul_kernel_avx512.cpp, which CMakeLists.txt compiles with wider
// vector flags. Those two first `#define Eigen` to a name of their own, so the Eigen template
// instances built for different ISAs never merge at link time (the linker keeps one copy of each
// inline symbol, and an AVX-512 copy must not serve a CPU without it).

#include <Eigen/Core>

#include "ember/core/cpu/gemm.h"

namespace ember::cpu {

template <class T>
using GemmFn = void (*)(MatrixRef<const T>, MatrixRef<const T>, MatrixRef<T>, T, T);

// One ISA level's kernels; null where this build lacks that level.
struct GemmKernels {
  GemmFn<float> f32 = nullptr;
  GemmFn<double> f64 = nullptr;
};
GemmKernels gemm_kernels_avx2();
GemmKernels gemm_kernels_avx512();

namespace {

template <class T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>,
                            Eigen::Unaligned, Eigen::OuterStride<>>;

// A row-major map when the columns are adjacent, else a column-major one: no copy either way.
template <int Order, class T>
ConstMap<T, Order> map(MatrixRef<const T> m) {
  int64_t outer = Order == Eigen::RowMajor ? m.row_stride : m.col_stride;
  return ConstMap<T, Order>(m.data, m.rows, m.cols, Eigen::OuterStride<>(outer));
}

template <class T, class A, class B>
void product(const A& a, const B& b, MatrixRef<T> c, T alpha, T beta) {
  using Out = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Out, Eigen::Unaligned, Eigen::OuterStride<>> cm(c.data, c.rows, c.cols,
                                                             Eigen::OuterStride<>(c.row_stride));
  if (beta == T(0)) {
    cm.noalias() = alpha * a * b;
  } else {
    if (beta != T(1)) cm *= beta;
    cm.noalias() += alpha * a * b;
  }
}

template <class T>
void eigen_gemm(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, T alpha, T beta) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  bool a_rows = a.col_stride == 1, b_rows = b.col_stride == 1;
  if (a_rows && b_rows) return product(map<R>(a), map<R>(b), c, alpha, beta);
  if (a_rows) return product(map<R>(a), map<C>(b), c, alpha, beta);
  if (b_rows) return product(map<C>(a), map<R>(b), c, alpha, beta);
  product(map<C>(a), map<C>(b), c, alpha, beta);
}

}  // namespace
}  // namespace ember::cpu
