#pragma once

// What layer_norm's kernels share with the ops that end in a layer norm (dropout_add_layer_norm):
// the parameters' type, the row sums of the backward, and the last kernel of a backward, which adds
// up the weight's and bias's per-block column sums (gelu_dropout's backward adds up its own with it).

#include "ember/core/tensor.h"
#include "ember/cuda/launch.cuh"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {

// Calls f(P{}) for the type of layer_norm's parameters: x's own T (a bf16 model's weights, read
// with no cast) or its compute type.
template <class T, class F>
void visit_param_type(ScalarType param, F&& f) {
  if (param == dtype_of<T> || std::is_same_v<T, Acc<T>>)
    f(T{});
  else
    f(Acc<T>{});
}

// Row sums of gxhat and gxhat * xhat, reduced together.
template <class A>
struct RowSums {
  A a, b;
  __device__ static RowSums identity() { return {A(0), A(0)}; }
  __device__ RowSums shfl_xor(int offset) const {
    return {cuda::shfl_xor(a, offset), cuda::shfl_xor(b, offset)};
  }
};

struct RowSumsCombine {
  template <class A>
  __device__ RowSums<A> operator()(const RowSums<A>& x, const RowSums<A>& y) const {
    return {x.a + y.a, x.b + y.b};
  }
};

// dw[c] and db[c] (of type P), and dsum[c] (of type A) = the sums over the `splits` blocks of
// partial [splits, parts, N] (parts 2: [dw | db], 3: [dw | db | dsum], dropout_add_layer_norm's
// dx summed for the next linear's bias; 1: [dw], gelu_dropout's): a block of threads (kSumCols,
// kSumRows) takes kSumCols columns (128 bytes of floats a row) down all the splits, each thread
// every kSumRows-th split (independent loads), part by part; the row threads' sums meet in shared
// memory, added in a fixed order (the result does not vary from run to run). Null outputs are not
// written.
constexpr int kSumCols = 32, kSumRows = 32;
template <class A, class P>
__global__ void __launch_bounds__(kSumCols* kSumRows)
    column_sum_kernel(P* dw, P* db, A* dsum, const A* partial, int parts, int64_t splits, int64_t N) {
  __shared__ A shared[kSumRows][kSumCols + 1];
  wait_for_prior_grids();  // launched by launch_dependent
  const int64_t c = blockIdx.x * static_cast<int64_t>(kSumCols) + threadIdx.x;
  for (int q = 0; q < parts; ++q) {
    A st = A(0);
    if (c < N)
      for (int64_t s = threadIdx.y; s < splits; s += kSumRows) st += partial[(s * parts + q) * N + c];
    if (q > 0) __syncthreads();  // the previous part's sums are read
    shared[threadIdx.y][threadIdx.x] = st;
    __syncthreads();
    if (threadIdx.y > 0 || c >= N) continue;
    A total = A(0);
    for (int y = 0; y < kSumRows; ++y) total += shared[y][threadIdx.x];
    if (q == 0 && dw) dw[c] = from_acc<P>(total);
    if (q == 1 && db) db[c] = from_acc<P>(total);
    if (q == 2 && dsum) dsum[c] = total;
  }
}

// dw, db and dsum (any undefined; dsum only with 3 parts) from partial [splits, 2 or 3, N] in A;
// the kernel waits for the one before it (launch_dependent).
template <class A, class P>
void launch_column_sums(const Tensor& dw, const Tensor& db, const Tensor& dsum, const Tensor& partial,
                        int64_t splits, int64_t N, cudaStream_t stream) {
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
  launch_dependent(column_sum_kernel<A, P>, dim3(static_cast<unsigned>(ceil_div<int64_t>(N, kSumCols))),
                   dim3(kSumCols, kSumRows), stream, static_cast<P*>(ptr(dw)), static_cast<P*>(ptr(db)),
                   static_cast<A*>(ptr(dsum)), static_cast<const A*>(partial.data_ptr()),
                   static_cast<int>(partial.size(1)), splits, N);
}

}  // namespace ember::cuda
