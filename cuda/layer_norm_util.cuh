#pragma once

// What layer_norm's kernels share with the ops that end in a layer norm (dropout_add_layer_norm):
// the parameters' type, the row sums of the backward, and the last kernel of a backward, which adds
// up the per-block column sums of the weight's and bias's gradients (and of other gradients that
// a backward sums over rows on the way: the bias gradient of the linear before it).

#include <algorithm>
#include <bit>
#include <initializer_list>

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

// Where column_sum_kernel writes part q's sums (nullptr: nowhere).
template <class P>
struct ColumnSumOutputs {
  P* part[3];
};

// out.part[q][c] (of type P) = the sums over the `splits` blocks of partial [splits, kParts, N]
// (layer_norm's [dw | db], dropout_add_layer_norm's [dw | db | dx's sums], or one part: the sums of a
// gradient over rows): a block of threads (kCols, up to kSumThreads / kCols rows, a power of two)
// takes kCols columns down all the splits, each thread with a few rows of independent loads; its
// rows' sums meet in a tree (a fixed order: the result does not vary from run to run). kSumCols
// columns (one 32-byte sector of floats) make N / kSumCols blocks that spread over the SMs; fewer
// splits than rows take as many row threads as they need, not 128 mostly idle. Rows of many columns
// (cross_entropy's head bias, 30522) take kWideCols (whole 128-byte lines) and at most kWideRows row
// threads: blocks enough to fill the GPU, each thread a run of splits, and a short tree.
constexpr int kSumCols = 8, kSumRows = 128, kSumThreads = kSumCols * kSumRows;
constexpr int kWideCols = 32, kWideRows = 8;
template <class A, class P, int kParts, int kCols>
__global__ void column_sum_kernel(ColumnSumOutputs<P> out, const A* partial, int64_t splits, int64_t N) {
  __shared__ A shared[kParts][kSumThreads / kCols][kCols];
  wait_for_prior_grids();  // launched by launch_dependent
  const int64_t c = blockIdx.x * static_cast<int64_t>(kCols) + threadIdx.x;
  A st[kParts] = {};
  if (c < N)
    for (int64_t s = threadIdx.y; s < splits; s += blockDim.y)
#pragma unroll
      for (int q = 0; q < kParts; ++q) st[q] += partial[(s * kParts + q) * N + c];
#pragma unroll
  for (int q = 0; q < kParts; ++q) shared[q][threadIdx.y][threadIdx.x] = st[q];
  for (int half = static_cast<int>(blockDim.y) / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.y < half)
#pragma unroll
      for (int q = 0; q < kParts; ++q)
        shared[q][threadIdx.y][threadIdx.x] += shared[q][threadIdx.y + half][threadIdx.x];
  }
  if (threadIdx.y > 0 || c >= N) return;
#pragma unroll
  for (int q = 0; q < kParts; ++q)
    if (out.part[q]) out.part[q][c] = from_acc<P>(shared[q][0][threadIdx.x]);
}

// outs[q] (undefined: not wanted) from partial [splits, outs.size(), N] in A, in P; the kernel waits
// for the one before it (launch_dependent).
template <class A, class P>
void launch_column_sums(std::initializer_list<Tensor> outs, const Tensor& partial, int64_t splits, int64_t N,
                        cudaStream_t stream) {
  ColumnSumOutputs<P> out{};
  int q = 0;
  for (const Tensor& t : outs) out.part[q++] = t.defined() ? static_cast<P*>(t.data_ptr()) : nullptr;
  auto launch = [&](auto cols) {
    constexpr int kCols = decltype(cols)::value;
    const int64_t max_rows = kCols == kSumCols ? kSumRows : kWideRows;
    const auto rows =
        static_cast<unsigned>(std::bit_ceil(static_cast<uint64_t>(std::min<int64_t>(splits, max_rows))));
    const auto kernel = q == 1   ? column_sum_kernel<A, P, 1, kCols>
                        : q == 2 ? column_sum_kernel<A, P, 2, kCols>
                                 : column_sum_kernel<A, P, 3, kCols>;
    launch_dependent(kernel, dim3(static_cast<unsigned>(ceil_div<int64_t>(N, kCols))), dim3(kCols, rows),
                     stream, out, static_cast<const A*>(partial.data_ptr()), splits, N);
  };
  if (ceil_div<int64_t>(N, kSumCols) >=
      4 * static_cast<int64_t>(get_device_properties().multi_processor_count))
    launch(std::integral_constant<int, kWideCols>{});
  else
    launch(std::integral_constant<int, kSumCols>{});
}

}  // namespace ember::cuda
