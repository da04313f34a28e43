// CUDA kernels of the loss family: a deterministic sum (fixed blocks summed in double, then the
// block sums in order by one block), nll with class weights, ignore_index and the label-smoothing
// term, cross entropy against class probabilities, BCE with logits over strided inputs, and cross
// entropy with class targets fused: a forward that reads the logits once in their dtype and keeps
// each row's logsumexp, and a backward that writes the gradient in one pass.
// Class targets are range-checked on the host side of a min/max reduction before the kernels.
#include <algorithm>

#include "ember/core/factories.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/loss_functors.h"
#include "ember/cuda/device_error.cuh"
#include "ember/cuda/nn_kernel_util.cuh"
#include "ember/cuda/offset_calc.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSumThreads = 512;
constexpr int64_t kSumBlocks = 1024;

// out[blockIdx.x] = the sum of the elements of `in` this block visits (in double).
template <class In, class Out>
__global__ void block_sum_kernel(Out* out, const In* in, int64_t n) {
  __shared__ double shared[kSumThreads / kWarpSize];
  double s = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    s += static_cast<double>(in[i]);
  s = block_reduce(s, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<Out>(s);
}

// The block count depends on n only, so the result has the same bits on every GPU.
void loss_sum_cuda(const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  cudaStream_t stream = current_stream();
  visit_compute_dtype("loss_sum", in.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const auto* pi = static_cast<const C*>(in.data_ptr());
    auto* po = static_cast<C*>(out.data_ptr());
    const int64_t blocks = std::clamp<int64_t>(ceil_div<int64_t>(n, 4 * kSumThreads), 1, kSumBlocks);
    Tensor partial = empty({blocks}, TensorOptions(kFloat64).device(in.device()));
    auto* pp = static_cast<double*>(partial.data_ptr());
    block_sum_kernel<C, double><<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(pp, pi, n);
    EMBER_CUDA_LAUNCH_CHECK();
    block_sum_kernel<double, C><<<1, kSumThreads, 0, stream>>>(po, pp, blocks);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// Threads per position of the class losses: a warp sums over the classes when there are many.
int group_for(int64_t classes) { return classes >= kWarpSize ? kWarpSize : 1; }

// sum over classes c of term(c) for one position, by the g threads (1 or a warp) that share it;
// every lane gets the sum.
template <class C, class F>
__device__ __forceinline__ C class_sum(int64_t nc, int lane, int g, F term) {
  C s = 0;
  for (int64_t c = lane; c < nc; c += g) s += term(c);
  return g > 1 ? warp_reduce(s, SumOp{}) : s;
}

// Positions i of [N, D] (class c of position i at row + c * D), g threads each.
template <class C>
__global__ void nll_kernel(C* loss, C* total, C* smooth, const C* logp, const int64_t* target,
                           const C* weight, int64_t n, int64_t nc, int64_t D, int64_t ignore_index, int g,
                           IndexCheck check) {
  const int lane = threadIdx.x % g;
  const int64_t per_grid = static_cast<int64_t>(gridDim.x) * blockDim.x / g;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / g; i < n; i += per_grid) {
    const int64_t t = target[i];
    const bool ignored = t == ignore_index || !check.ok(t);
    const C* row = logp + (i / D) * nc * D + i % D;
    if (smooth) {
      C s = ignored ? C(0) : class_sum<C>(nc, lane, g, [&](int64_t c) {
        return (weight ? weight[c] : C(1)) * row[c * D];
      });
      if (lane == 0) smooth[i] = ignored ? C(0) : -s;
    }
    if (lane == 0) {
      const C w = ignored ? C(0) : weight ? weight[t] : C(1);
      loss[i] = ignored ? C(0) : -w * row[t * D];
      total[i] = w;
    }
  }
}

unsigned blocks_for(int64_t positions, int g) { return grid_for(positions * g, kThreads); }

// A target other than ignore_index outside [0, nc) counts as ignored, and the forward kernels
// record it for `op`'s error at the next synchronization.
IndexCheck target_check(const char* op, int64_t nc) {
  return index_check(op, 1, nc, DeviceIndexError::ClassTarget);
}

__device__ __forceinline__ bool is_class(int64_t t, int64_t nc) {
  return static_cast<uint64_t>(t) < static_cast<uint64_t>(nc);
}

void nll_loss_cuda(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth, const Tensor& logp,
                   const Tensor& target, const Tensor& weight, int64_t ignore_index, const char* op) {
  const int64_t nc = logp.size(1), D = logp.size(2), n = target.numel();
  cudaStream_t stream = current_stream();
  visit_compute_dtype(op, logp.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const int g = smooth.defined() ? group_for(nc) : 1;
    nll_kernel<C><<<blocks_for(n, g), kThreads, 0, stream>>>(
        static_cast<C*>(loss.data_ptr()), static_cast<C*>(total_weight.data_ptr()),
        smooth.defined() ? static_cast<C*>(smooth.data_ptr()) : nullptr,
        static_cast<const C*>(logp.data_ptr()), static_cast<const int64_t*>(target.data_ptr()),
        weight.defined() ? static_cast<const C*>(weight.data_ptr()) : nullptr, n, nc, D, ignore_index, g,
        target_check(op, nc));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

template <class C>
__global__ void soft_cross_entropy_kernel(C* loss, const C* logp, const C* target, const C* weight, int64_t n,
                                          int64_t nc, int64_t D, C keep, C uniform, int g) {
  const int lane = threadIdx.x % g;
  const int64_t per_grid = static_cast<int64_t>(gridDim.x) * blockDim.x / g;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / g; i < n; i += per_grid) {
    const int64_t base = (i / D) * nc * D + i % D;
    const C s = class_sum<C>(nc, lane, g, [&](int64_t c) {
      const int64_t k = base + c * D;
      return logp[k] * (target[k] * keep + uniform) * (weight ? weight[c] : C(1));
    });
    if (lane == 0) loss[i] = -s;
  }
}

void soft_cross_entropy_cuda(const Tensor& loss, const Tensor& logp, const Tensor& target,
                             const Tensor& weight, double label_smoothing) {
  const int64_t nc = logp.size(1), D = logp.size(2), n = loss.numel();
  cudaStream_t stream = current_stream();
  visit_compute_dtype("cross_entropy", logp.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const int g = group_for(nc);
    soft_cross_entropy_kernel<C><<<blocks_for(n, g), kThreads, 0, stream>>>(
        static_cast<C*>(loss.data_ptr()), static_cast<const C*>(logp.data_ptr()),
        static_cast<const C*>(target.data_ptr()),
        weight.defined() ? static_cast<const C*>(weight.data_ptr()) : nullptr, n, nc, D,
        static_cast<C>(1 - label_smoothing), static_cast<C>(label_smoothing / static_cast<double>(nc)), g);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// out, x, t, pos_weight at the offsets of `oc`; x and t in their own floating dtypes.
template <class C>
__global__ void bce_kernel(C* out, const void* x, ScalarType xt, const void* t, ScalarType tt,
                           const C* pos_weight, OffsetCalc<4> oc, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[4];
    oc.get(i, off);
    out[off[0]] = ops::BceWithLogits<C>{}(load_float_as<C>(x, xt, off[1]), load_float_as<C>(t, tt, off[2]),
                                          pos_weight[off[3]]);
  }
}

void bce_with_logits_cuda(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  const Tensor pw = pos_weight.expand(out.sizes());
  const OffsetCalc<4> oc =
      make_offset_calc<4>(op, out.sizes(), {out.strides(), x.strides(), t.strides(), pw.strides()});
  const int64_t n = out.numel();
  cudaStream_t stream = current_stream();
  visit_compute_dtype(op, out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    bce_kernel<C><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<C*>(out.data_ptr()), x.data_ptr(), x.dtype(), t.data_ptr(), t.dtype(),
        static_cast<const C*>(pw.data_ptr()), oc, n);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// --- cross_entropy with class targets (see CrossEntropyForwardFn and CrossEntropyBackwardFn) ---

// The terms of one position from its logsumexp l, written by one thread: x_t is the target's logit,
// s = sum_c w[c] * (x_c - l) when smoothing.
template <class A>
__device__ __forceinline__ void write_position(A* loss, A* total, A* smooth, A* lse, int64_t p, A l, A x_t,
                                               A s, const A* weight, int64_t t, bool ignored) {
  lse[p] = l;
  const A w = ignored ? A(0) : weight ? weight[t] : A(1);
  loss[p] = ignored ? A(0) : -w * (x_t - l);
  total[p] = w;
  if (smooth) smooth[p] = ignored ? A(0) : -s;
}

// D == 1: rows of C contiguous logits ldx apart, a group of threads per row (as
// softmax_rows_kernel): one pass for the max and sum of exp, a second over the (cached) row for the
// smoothing term.
template <class T, int VEC, bool kWarpPerRow>
__global__ void cross_entropy_rows_kernel(Acc<T>* loss, Acc<T>* total, Acc<T>* smooth, Acc<T>* lse,
                                          const T* in, int64_t ldx, const int64_t* target,
                                          const Acc<T>* weight, int64_t rows, int64_t nc,
                                          int64_t ignore_index, IndexCheck check) {
  using A = Acc<T>;
  __shared__ MaxSum<A> shared[kWarpSize];
  __shared__ A shared_sum[kWarpSize];
  const int g = kWarpPerRow ? kWarpSize : blockDim.x;
  const int t = kWarpPerRow ? threadIdx.x % kWarpSize : threadIdx.x;
  const int64_t per_block = kWarpPerRow ? blockDim.x / kWarpSize : 1;
  // Every thread of a group runs the same iterations: the reductions below need all of them.
  for (int64_t row = blockIdx.x * per_block + (kWarpPerRow ? threadIdx.x / kWarpSize : 0); row < rows;
       row += gridDim.x * per_block) {
    const T* x = in + row * ldx;
    MaxSum<A> st = row_max_sum<T, VEC>(x, nc, t, g);
    st = kWarpPerRow ? warp_allreduce(st, MaxSumCombine{}) : block_allreduce(st, MaxSumCombine{}, shared);
    const A l = st.m + log_(st.s);
    const int64_t tg = target[row];
    const bool ignored = tg == ignore_index || !check.ok(tg);
    A s = A(0);
    if (smooth) {
      if (!ignored)
        for_each_in_row<T, VEC>(x, nc, t, g,
                                [&](int64_t c, A v) { s += (weight ? weight[c] : A(1)) * (v - l); });
      s = kWarpPerRow ? warp_reduce(s, SumOp{}) : block_reduce(s, SumOp{}, A(0), shared_sum);
    }
    if (t == 0)
      write_position(loss, total, smooth, lse, row, l, ignored ? A(0) : to_acc(x[tg]), s, weight, tg,
                     ignored);
  }
}

// D > 1: a thread per position, walking its C logits D apart (neighbouring threads read
// neighbouring positions).
template <class T>
__global__ void cross_entropy_columns_kernel(Acc<T>* loss, Acc<T>* total, Acc<T>* smooth, Acc<T>* lse,
                                             const T* in, const int64_t* target, const Acc<T>* weight,
                                             int64_t n, int64_t nc, int64_t D, int64_t ignore_index,
                                             IndexCheck check) {
  using A = Acc<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* x = in + (i / D) * nc * D + i % D;
    MaxSum<A> st = MaxSum<A>::identity();
    for (int64_t c = 0; c < nc; ++c) st.add(to_acc(x[c * D]));
    const A l = st.m + log_(st.s);
    const int64_t tg = target[i];
    const bool ignored = tg == ignore_index || !check.ok(tg);
    A s = A(0);
    if (smooth && !ignored)
      for (int64_t c = 0; c < nc; ++c) s += (weight ? weight[c] : A(1)) * (to_acc(x[c * D]) - l);
    write_position(loss, total, smooth, lse, i, l, ignored ? A(0) : to_acc(x[tg * D]), s, weight, tg,
                   ignored);
  }
}

void cross_entropy_forward_cuda(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth,
                                const Tensor& lse, const Tensor& input, const Tensor& target,
                                const Tensor& weight, int64_t ignore_index, const char* op) {
  const int64_t N = input.size(0), nc = input.size(1), D = input.size(2);
  const IndexCheck check = target_check(op, nc);
  cudaStream_t stream = current_stream();
  visit_float_dtype(op, input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    auto* pl = static_cast<A*>(loss.data_ptr());
    auto* pt = static_cast<A*>(total_weight.data_ptr());
    auto* ps = smooth.defined() ? static_cast<A*>(smooth.data_ptr()) : nullptr;
    auto* plse = static_cast<A*>(lse.data_ptr());
    const auto* px = static_cast<const T*>(input.data_ptr());
    const auto* ptg = static_cast<const int64_t*>(target.data_ptr());
    const auto* pw = weight.defined() ? static_cast<const A*>(weight.data_ptr()) : nullptr;
    if (D > 1) {
      cross_entropy_columns_kernel<T><<<grid_for(N * D, kThreads), kThreads, 0, stream>>>(
          pl, pt, ps, plse, px, ptg, pw, N * D, nc, D, ignore_index, check);
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
    // Vectors whatever the rows' alignment (for_each_in_row reads up to the first boundary alone).
    constexpr int VEC = 16 / sizeof(T);
    launch_rows<VEC>(N, nc, [&](auto warp_per_row, unsigned grid, int threads) {
      cross_entropy_rows_kernel<T, VEC, decltype(warp_per_row)::value><<<grid, threads, 0, stream>>>(
          pl, pt, ps, plse, px, input.stride(0), ptg, pw, N, nc, ignore_index, check);
    });
  });
}

// The factors of one position's gradient row: gx[c] = p[c] * scale - uniform * w[c] - (c == t) * at_target.
template <class A>
struct GradRow {
  A scale, uniform, at_target;
};

template <class A>
__device__ __forceinline__ GradRow<A> grad_row(A ge, const A* w, const A* wsum, int64_t nc, int64_t t, A keep,
                                               A u) {
  const A wt = w ? w[t] : A(1);
  return {ge * (keep * wt + u * (wsum ? *wsum : static_cast<A>(nc))), ge * u, ge * keep * wt};
}

// D == 1: a group of threads per row (no reduction: the group only shapes the 16-byte accesses);
// gx's rows ldg apart, the input's ldx.
template <class T, int VEC, bool kWarpPerRow>
__global__ void cross_entropy_backward_rows_kernel(T* gx, int64_t ldg, const Acc<T>* ge, bool ge_scalar,
                                                   const T* in, int64_t ldx, const Acc<T>* lse,
                                                   const int64_t* target, const Acc<T>* w, const Acc<T>* wsum,
                                                   int64_t rows, int64_t nc, int64_t ignore_index,
                                                   Acc<T> keep, Acc<T> u) {
  using A = Acc<T>;
  const int g = kWarpPerRow ? kWarpSize : blockDim.x;
  const int t = kWarpPerRow ? threadIdx.x % kWarpSize : threadIdx.x;
  const int64_t per_block = kWarpPerRow ? blockDim.x / kWarpSize : 1;
  for (int64_t row = blockIdx.x * per_block + (kWarpPerRow ? threadIdx.x / kWarpSize : 0); row < rows;
       row += gridDim.x * per_block) {
    const int64_t tg = target[row];
    const bool ignored = tg == ignore_index || !is_class(tg, nc);
    const GradRow<A> f = ignored ? GradRow<A>{} : grad_row(ge[ge_scalar ? 0 : row], w, wsum, nc, tg, keep, u);
    const A l = lse[row];
    map_row<T, VEC>(in + row * ldx, gx + row * ldg, nc, t, g, [&](int64_t c, A v) {
      if (ignored) return A(0);
      A r = exp_minus_as<T>(v, l) * f.scale - f.uniform * (w ? w[c] : A(1));
      return c == tg ? r - f.at_target : r;
    });
  }
}

// D > 1: one thread per element of gx [N, C, D]; 32-bit index arithmetic when the element count
// allows.
template <class T>
__global__ void cross_entropy_backward_kernel(T* gx, const Acc<T>* ge, bool ge_scalar, const T* in,
                                              const Acc<T>* lse, const int64_t* target, const Acc<T>* w,
                                              const Acc<T>* wsum, int64_t n, int64_t nc, int64_t D,
                                              int64_t ignore_index, Acc<T> keep, Acc<T> u) {
  using A = Acc<T>;
  const bool narrow = n <= static_cast<int64_t>(UINT32_MAX);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = narrow ? static_cast<uint32_t>(i) / static_cast<uint32_t>(D) : i / D;
    const int64_t row = narrow ? static_cast<uint32_t>(q) / static_cast<uint32_t>(nc) : q / nc;
    const int64_t c = q - row * nc, p = row * D + (i - q * D);
    const int64_t t = target[p];
    A v = A(0);
    if (t != ignore_index && is_class(t, nc)) {
      const GradRow<A> f = grad_row(ge[ge_scalar ? 0 : p], w, wsum, nc, t, keep, u);
      v = exp_minus_as<T>(to_acc(in[i]), lse[p]) * f.scale - f.uniform * (w ? w[c] : A(1));
      if (c == t) v -= f.at_target;
    }
    gx[i] = from_acc<T>(v);
  }
}

void cross_entropy_backward_cuda(const Tensor& gx, const Tensor& grad, const Tensor& input, const Tensor& lse,
                                 const Tensor& target, const Tensor& weight, const Tensor& weight_sum,
                                 int64_t ignore_index, double label_smoothing) {
  const int64_t N = input.size(0), nc = input.size(1), D = input.size(2);
  cudaStream_t stream = current_stream();
  visit_float_dtype("cross_entropy", gx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    auto* pgx = static_cast<T*>(gx.data_ptr());
    const auto* pge = static_cast<const A*>(grad.data_ptr());
    const bool ge_scalar = grad.numel() == 1;
    const auto* px = static_cast<const T*>(input.data_ptr());
    const auto* plse = static_cast<const A*>(lse.data_ptr());
    const auto* ptg = static_cast<const int64_t*>(target.data_ptr());
    const auto* pw = weight.defined() ? static_cast<const A*>(weight.data_ptr()) : nullptr;
    const auto* pws = weight_sum.defined() ? static_cast<const A*>(weight_sum.data_ptr()) : nullptr;
    const A keep = static_cast<A>(1 - label_smoothing),
            u = static_cast<A>(label_smoothing / static_cast<double>(nc));
    if (D > 1) {
      const int64_t n = gx.numel();
      cross_entropy_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          pgx, pge, ge_scalar, px, plse, ptg, pw, pws, n, nc, D, ignore_index, keep, u);
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
    // Vectors whatever the rows' alignment (map_row splices the input's to gx's).
    constexpr int VEC = 16 / sizeof(T);
    launch_rows<VEC>(N, nc, [&](auto warp_per_row, unsigned grid, int threads) {
      cross_entropy_backward_rows_kernel<T, VEC, decltype(warp_per_row)::value>
          <<<grid, threads, 0, stream>>>(pgx, gx.stride(0), pge, ge_scalar, px, input.stride(0), plse, ptg,
                                         pw, pws, N, nc, ignore_index, keep, u);
    });
  });
}

KernelRegistrar<LossSumFn> reg_sum(loss_sum_stub, kCUDA, &loss_sum_cuda);
KernelRegistrar<NllLossFn> reg_nll(nll_loss_stub, kCUDA, &nll_loss_cuda);
KernelRegistrar<SoftCrossEntropyFn> reg_soft(soft_cross_entropy_stub, kCUDA, &soft_cross_entropy_cuda);
KernelRegistrar<BceWithLogitsFn> reg_bce(bce_with_logits_stub, kCUDA, &bce_with_logits_cuda);
KernelRegistrar<CrossEntropyForwardFn> reg_ce_forward(cross_entropy_forward_stub, kCUDA,
                                                      &cross_entropy_forward_cuda);
KernelRegistrar<CrossEntropyBackwardFn> reg_ce_backward(cross_entropy_backward_stub, kCUDA,
                                                        &cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
