// CUDA (log_)softmax and its backward, x viewed as [outer, K, inner] and reduced over K. The last
// dim (inner == 1) reads each row once into registers (a warp per row up to 1024 elements, a block
// per row up to 32768, 16-byte loads), reduces it there (the forward's max and sum of exp, the
// backward's sum of gy * y or of gy) and writes; longer rows are read twice. Other dims put threads
// across inner columns and split K among the block's rows of threads. f16/bf16 compute in float.
#include <algorithm>

#include "ember/core/ops/softmax.h"
#include "ember/core/shape.h"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kInnerThreads = 256;

// y = x - (m + log s) for log_softmax, exp(x - m) / s for softmax.
template <class A>
struct SoftmaxOut {
  A m, shift, inv;
  bool log;

  __device__ SoftmaxOut(const MaxSum<A>& st, bool take_log)
      : m(st.m), shift(st.m + log_(st.s)), inv(A(1) / st.s), log(take_log) {}
  __device__ A operator()(int64_t, A x) const { return log ? x - shift : exp_minus(x, m) * inv; }
};

// Rows of K contiguous elements, split as RowSplit S says. With the row in registers: its max,
// then the sum of exp, then the output, from one read; else the online max and sum of exp, then a
// second read.
template <class T, int VEC, RowSplit S>
__global__ void softmax_rows_kernel(T* out, const T* in, int64_t rows, int64_t K, bool log) {
  using A = Acc<T>;
  __shared__ A shared_acc[kWarpSize];
  __shared__ MaxSum<A> shared[kWarpSize];
  const RowGroup<S> grp;
  const int64_t nvec = K / VEC;
  for (int64_t row = grp.first; row < rows; row += grp.step) {
    const T* x = in + row * K;
    if constexpr (S == RowSplit::kBlockTwoPass) {
      MaxSum<A> st = row_max_sum<T, VEC>(x, K, grp.t, grp.g);
      st = block_allreduce(st, MaxSumCombine{}, shared);
      map_row<T, VEC>(x, out + row * K, K, grp.t, grp.g, SoftmaxOut<A>(st, log));
    } else {
      using R = RowRegs<T, VEC>;
      R r;
      r.load(x, nvec, grp.t, grp.g);
      A m = -infinity<A>(), s = A(0);
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = MaxOp{}(m, r.acc(k).v[j]);
      });
      m = grp.allreduce(m, MaxOp{}, -infinity<A>(), shared_acc);
      T* o = out + row * K;
      // The numerators exp(x - m) by exp_minus_as: m is -inf only in a row of all -inf, NaN either way.
      if (log) {  // x - (m + log s): the sum's terms are not kept
        for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) s += exp_minus_as<T>(r.acc(k).v[j], m);
        });
        const SoftmaxOut<A> f({m, grp.allreduce(s, SumOp{}, A(0), shared_acc)}, true);
        store_slots<T, VEC, R::kSlots>(o, nvec, grp.t, grp.g,
                                       [&](int64_t, int k, int j) { return r.acc(k).v[j] - f.shift; });
      } else {  // exp(x - m) / s: each exp taken once and kept, over x for float and double
        [[maybe_unused]] A kept[std::is_same_v<T, A> ? 1 : R::kSlots][VEC];
        auto e = [&](int k, int j) -> A& {
          if constexpr (std::is_same_v<T, A>)
            return r.v[k].v[j];
          else
            return kept[k][j];
        };
        for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) s += e(k, j) = exp_minus_as<T>(r.acc(k).v[j], m);
        });
        const SoftmaxOut<A> f({m, grp.allreduce(s, SumOp{}, A(0), shared_acc)}, false);
        store_slots<T, VEC, R::kSlots>(o, nvec, grp.t, grp.g,
                                       [&](int64_t, int k, int j) { return e(k, j) * f.inv; });
      }
    }
  }
}

// The state of each column of a [blockDim.y, blockDim.x] block merged over its blockDim.y (a power
// of two) threads; every thread gets its column's result. `shared` holds kInnerThreads states.
template <class S, class Combine>
__device__ __forceinline__ S column_allreduce(S s, Combine combine, S* shared) {
  const int bx = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
  shared[ty * bx + tx] = s;
  __syncthreads();
  for (int half = blockDim.y / 2; half > 0; half /= 2) {
    if (ty < half) shared[ty * bx + tx] = combine(shared[ty * bx + tx], shared[(ty + half) * bx + tx]);
    __syncthreads();
  }
  s = shared[tx];
  __syncthreads();  // all have read shared before the next call writes it
  return s;
}

// inner > 1: a block is blockDim.x columns of one outer index by blockDim.y threads splitting K;
// the partial states meet in shared memory.
template <class T>
__global__ void softmax_inner_kernel(T* out, const T* in, int64_t outer, int64_t K, int64_t inner, bool log) {
  using A = Acc<T>;
  __shared__ MaxSum<A> shared[kInnerThreads];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col_blocks = ceil_div<int64_t>(inner, bx);
  for (int64_t task = blockIdx.x; task < outer * col_blocks; task += gridDim.x) {
    const int64_t o = task / col_blocks, j = task % col_blocks * bx + tx;
    const bool active = j < inner;
    const int64_t base = o * K * inner + j;
    MaxSum<A> st = MaxSum<A>::identity();
    if (active)
      for (int64_t k = ty; k < K; k += by) st.add(to_acc(in[base + k * inner]));
    const SoftmaxOut<A> f(column_allreduce(st, MaxSumCombine{}, shared), log);
    if (active)
      for (int64_t k = ty; k < K; k += by) {
        const int64_t i = base + k * inner;
        out[i] = from_acc<T>(f(i, to_acc(in[i])));
      }
  }
}

// --- Backward: gx = y * (gy - s) with s = sum(gy * y) for softmax, gy - exp(y) * s with
// s = sum(gy) for log_softmax. ---

template <class A>
__device__ __forceinline__ A backward_term(A gy, A y, bool log) {
  return log ? gy : gy * y;
}
template <class A>
__device__ __forceinline__ A backward_out(A gy, A y, A s, bool log) {
  return log ? gy - exp_(y) * s : y * (gy - s);
}

// Rows of K contiguous elements, split as in softmax_rows_kernel.
template <class T, int VEC, RowSplit S>
__global__ void softmax_backward_rows_kernel(T* gx, const T* gy, const T* y, int64_t rows, int64_t K,
                                             bool log) {
  using A = Acc<T>;
  __shared__ A shared[kWarpSize];
  const RowGroup<S> grp;
  const int64_t nvec = K / VEC;
  for (int64_t row = grp.first; row < rows; row += grp.step) {
    const T* gr = gy + row * K;
    const T* yr = y + row * K;
    A s = A(0);
    if constexpr (S == RowSplit::kBlockTwoPass) {
      for_each_in_rows<T, VEC>(gr, yr, K, grp.t, grp.g,
                               [&](int64_t, A gv, A yv) { s += backward_term(gv, yv, log); });
      s = block_reduce(s, SumOp{}, A(0), shared);
      map_rows<T, VEC>(gr, yr, gx + row * K, K, grp.t, grp.g,
                       [&](int64_t, A gv, A yv) { return backward_out(gv, yv, s, log); });
    } else {
      using R = RowRegs<T, VEC>;
      R gv, yv;
      gv.load(gr, nvec, grp.t, grp.g);
      yv.load(yr, nvec, grp.t, grp.g);
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s += backward_term(gv.acc(k).v[j], yv.acc(k).v[j], log);
      });
      s = grp.allreduce(s, SumOp{}, A(0), shared);
      store_slots<T, VEC, R::kSlots>(gx + row * K, nvec, grp.t, grp.g, [&](int64_t, int k, int j) {
        return backward_out(gv.acc(k).v[j], yv.acc(k).v[j], s, log);
      });
    }
  }
}

template <class T>
__global__ void softmax_backward_inner_kernel(T* gx, const T* gy, const T* y, int64_t outer, int64_t K,
                                              int64_t inner, bool log) {
  using A = Acc<T>;
  __shared__ A shared[kInnerThreads];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col_blocks = ceil_div<int64_t>(inner, bx);
  for (int64_t task = blockIdx.x; task < outer * col_blocks; task += gridDim.x) {
    const int64_t o = task / col_blocks, j = task % col_blocks * bx + tx;
    const bool active = j < inner;
    const int64_t base = o * K * inner + j;
    A s = A(0);
    if (active)
      for (int64_t k = ty; k < K; k += by) {
        const int64_t i = base + k * inner;
        s += backward_term(to_acc(gy[i]), to_acc(y[i]), log);
      }
    s = column_allreduce(s, SumOp{}, shared);
    if (active)
      for (int64_t k = ty; k < K; k += by) {
        const int64_t i = base + k * inner;
        gx[i] = from_acc<T>(backward_out(to_acc(gy[i]), to_acc(y[i]), s, log));
      }
  }
}

// A contiguous tensor as [outer, K, inner], reduced over K (the dim `dim`).
struct ReduceShape {
  int64_t outer, K, inner;
};

ReduceShape reduce_shape(const Tensor& t, int64_t dim) {
  IntArrayRef sizes = t.sizes();
  const int64_t K = t.dim() == 0 ? 1 : sizes[dim];
  const int64_t outer = numel_of(IntArrayRef(sizes.data(), static_cast<size_t>(dim)));
  return {outer, K, t.numel() / (outer * K)};
}

// Threads across up to 32 inner columns and down K; a power-of-two block of at most kInnerThreads.
template <class F>
void launch_inner(const ReduceShape& r, F&& launch) {
  const int bx = pow2_ceil(r.inner, kWarpSize);
  const int by = pow2_ceil(ceil_div<int64_t>(r.K, 4), kInnerThreads / bx);
  launch(grid_for(r.outer * ceil_div<int64_t>(r.inner, bx), 1), dim3(bx, by));
  EMBER_CUDA_LAUNCH_CHECK();
}

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const ReduceShape r = reduce_shape(in, dim);
  cudaStream_t stream = current_stream();
  visit_float_dtype("softmax", in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out.data_ptr());
    const T* pi = static_cast<const T*>(in.data_ptr());
    if (r.inner > 1) {
      launch_inner(r, [&](unsigned grid, dim3 block) {
        softmax_inner_kernel<T><<<grid, block, 0, stream>>>(po, pi, r.outer, r.K, r.inner, log);
      });
      return;
    }
    with_vector_width<T>(r.K, {po, pi}, [&](auto vec) {
      launch_row_kernel<T>(
          r.outer, r.K, kWarpsPerBlock,
          [](auto split) { return softmax_rows_kernel<T, decltype(vec)::value, decltype(split)::value>; },
          [&](auto kernel, auto, unsigned grid, int threads) {
            kernel<<<grid, threads, 0, stream>>>(po, pi, r.outer, r.K, log);
          });
    });
  });
}

void softmax_backward_kernel(const Tensor& gx, const Tensor& gy, const Tensor& y, int64_t dim, bool log) {
  const ReduceShape r = reduce_shape(y, dim);
  cudaStream_t stream = current_stream();
  visit_float_dtype("softmax_backward", y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pgx = static_cast<T*>(gx.data_ptr());
    const T* pgy = static_cast<const T*>(gy.data_ptr());
    const T* py = static_cast<const T*>(y.data_ptr());
    if (r.inner > 1) {
      launch_inner(r, [&](unsigned grid, dim3 block) {
        softmax_backward_inner_kernel<T>
            <<<grid, block, 0, stream>>>(pgx, pgy, py, r.outer, r.K, r.inner, log);
      });
      return;
    }
    with_vector_width<T>(r.K, {pgx, pgy, py}, [&](auto vec) {
      launch_row_kernel<T>(
          r.outer, r.K, kWarpsPerBlock,
          [](auto split) {
            return softmax_backward_rows_kernel<T, decltype(vec)::value, decltype(split)::value>;
          },
          [&](auto kernel, auto, unsigned grid, int threads) {
            kernel<<<grid, threads, 0, stream>>>(pgx, pgy, py, r.outer, r.K, log);
          });
    });
  });
}

KernelRegistrar<SoftmaxFn> reg(softmax_stub, kCUDA, &softmax_kernel);
KernelRegistrar<SoftmaxBackwardFn> reg_backward(softmax_backward_stub, kCUDA, &softmax_backward_kernel);

}  // namespace
}  // namespace ember::cuda
