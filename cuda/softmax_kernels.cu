// CUDA (log_)softmax, x viewed as [outer, K, inner] and reduced over K. The last dim (inner == 1)
// takes one pass for an online max and sum of exp (a warp per row up to 1024 elements, a block
// per row beyond, 16-byte loads) and one to write; other dims put threads across inner columns
// and split K among the block's rows of threads. f16/bf16 compute in float.
#include <algorithm>

#include "ember/core/ops/softmax.h"
#include "ember/core/shape.h"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int64_t kWarpRowMax = 1024;  // longest row a warp handles alone
constexpr int kWarpsPerBlock = 4;
constexpr int kInnerThreads = 256;

// exp(x - m), with exp(-inf - m) = 0 even for m = -inf: a masked element adds nothing, while a
// row of only -inf still ends up 0 / 0 = NaN (as on the CPU and in PyTorch).
template <class A>
__device__ __forceinline__ A exp_minus(A x, A m) {
  return x == -infinity<A>() ? A(0) : exp_(x - m);
}

// Running max m and sum s of exp(x - m), merged by rescaling to the larger max.
template <class A>
struct MaxSum {
  A m, s;

  __device__ static MaxSum identity() { return {-infinity<A>(), A(0)}; }
  __device__ void add(A x) {
    if (x > m) {
      s = s * exp_minus(m, x) + exp_minus(x, x);  // exp_minus(x, x) is NaN for x = inf, as on the CPU
      m = x;
    } else {
      s += exp_minus(x, m);  // NaN inputs land here and make the row NaN
    }
  }
  __device__ MaxSum shfl_xor(int offset) const {
    return {cuda::shfl_xor(m, offset), cuda::shfl_xor(s, offset)};
  }
};

struct MaxSumCombine {
  template <class A>
  __device__ MaxSum<A> operator()(const MaxSum<A>& a, const MaxSum<A>& b) const {
    A m = a.m > b.m ? a.m : b.m;
    return {m, a.s * exp_minus(a.m, m) + b.s * exp_minus(b.m, m)};
  }
};

// y = x - (m + log s) for log_softmax, exp(x - m) / s for softmax.
template <class A>
struct SoftmaxOut {
  A m, shift, inv;
  bool log;

  __device__ SoftmaxOut(const MaxSum<A>& st, bool take_log)
      : m(st.m), shift(st.m + log_(st.s)), inv(A(1) / st.s), log(take_log) {}
  __device__ A operator()(int64_t, A x) const { return log ? x - shift : exp_minus(x, m) * inv; }
};

// Rows of K contiguous elements; a group of threads per row (a warp, or the whole block).
template <class T, int VEC, bool kWarpPerRow>
__global__ void softmax_rows_kernel(T* out, const T* in, int64_t rows, int64_t K, bool log) {
  using A = Acc<T>;
  __shared__ MaxSum<A> shared[kWarpSize];
  const int g = kWarpPerRow ? kWarpSize : blockDim.x;
  const int t = kWarpPerRow ? threadIdx.x % kWarpSize : threadIdx.x;
  const int64_t per_block = kWarpPerRow ? blockDim.x / kWarpSize : 1;
  // Every thread of a group runs the same iterations: the reductions below need all of them.
  for (int64_t row = blockIdx.x * per_block + (kWarpPerRow ? threadIdx.x / kWarpSize : 0); row < rows;
       row += gridDim.x * per_block) {
    const T* x = in + row * K;
    MaxSum<A> st = MaxSum<A>::identity();
    for_each_in_row<T, VEC>(x, K, t, g, [&](int64_t, A v) { st.add(v); });
    st = kWarpPerRow ? warp_allreduce(st, MaxSumCombine{}) : block_allreduce(st, MaxSumCombine{}, shared);
    map_row<T, VEC>(x, out + row * K, K, t, g, SoftmaxOut<A>(st, log));
  }
}

// inner > 1: a block is blockDim.x columns of one outer index by blockDim.y (a power of two)
// threads splitting K; the partial states meet in shared memory.
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
    shared[ty * bx + tx] = st;
    __syncthreads();
    for (int half = by / 2; half > 0; half /= 2) {
      if (ty < half)
        shared[ty * bx + tx] = MaxSumCombine{}(shared[ty * bx + tx], shared[(ty + half) * bx + tx]);
      __syncthreads();
    }
    const SoftmaxOut<A> f(shared[tx], log);
    __syncthreads();  // all have read shared before the next task writes it
    if (active)
      for (int64_t k = ty; k < K; k += by) {
        const int64_t i = base + k * inner;
        out[i] = from_acc<T>(f(i, to_acc(in[i])));
      }
  }
}

int pow2_ceil(int64_t v, int cap) {
  int p = 1;
  while (p < v && p < cap) p *= 2;
  return p;
}

template <class T, int VEC>
void launch_rows(T* out, const T* in, int64_t rows, int64_t K, bool log, cudaStream_t stream) {
  if (K <= kWarpRowMax) {
    const int threads = kWarpsPerBlock * kWarpSize;
    softmax_rows_kernel<T, VEC, true>
        <<<grid_for(rows, kWarpsPerBlock), threads, 0, stream>>>(out, in, rows, K, log);
  } else {
    // About 8 vectors per thread, whole warps, at most 1024 threads.
    const int64_t want = ceil_div<int64_t>(ceil_div<int64_t>(K, VEC), 8);
    const int threads =
        static_cast<int>(std::min<int64_t>(1024, ceil_div<int64_t>(want, kWarpSize) * kWarpSize));
    softmax_rows_kernel<T, VEC, false><<<grid_for(rows, 1), threads, 0, stream>>>(out, in, rows, K, log);
  }
  EMBER_CUDA_LAUNCH_CHECK();
}

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  IntArrayRef sizes = in.sizes();
  const int64_t K = in.dim() == 0 ? 1 : sizes[dim];
  const int64_t outer = numel_of(IntArrayRef(sizes.data(), static_cast<size_t>(dim)));
  const int64_t inner = in.numel() / (outer * K);
  cudaStream_t stream = current_stream();
  visit_float_dtype("softmax", in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out.data_ptr());
    const T* pi = static_cast<const T*>(in.data_ptr());
    if (inner == 1) {
      if (vector_width<T>(K, {po, pi}) > 1)
        launch_rows<T, 16 / sizeof(T)>(po, pi, outer, K, log, stream);
      else
        launch_rows<T, 1>(po, pi, outer, K, log, stream);
      return;
    }
    const int bx = pow2_ceil(inner, kWarpSize);
    const int by = pow2_ceil(ceil_div<int64_t>(K, 4), kInnerThreads / bx);
    const int64_t tasks = outer * ceil_div<int64_t>(inner, bx);
    softmax_inner_kernel<T><<<grid_for(tasks, 1), dim3(bx, by), 0, stream>>>(po, pi, outer, K, inner, log);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<SoftmaxFn> reg(softmax_stub, kCUDA, &softmax_kernel);

}  // namespace
}  // namespace ember::cuda
