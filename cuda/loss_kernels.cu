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
#include "ember/cuda/layer_norm_util.cuh"
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

// What the backward kernels need of each position: gx[c] = p[c] * scale - uniform * w[c] - (c == t) *
// at_target, with p[c] = exp(x[c] - lse), from ge, the class weights and label smoothing (keep = 1 - ls,
// u = ls / C). grad_of_row(args, p) gives position p's GradOfRow, the one formula of the three kernels.
template <class T>
struct GradArgs {
  using A = Acc<T>;
  const A* ge;
  bool ge_scalar;
  const A* lse;
  const int64_t* target;
  const A *w, *wsum;
  int64_t nc, ignore_index;
  A keep, u;
};

template <class T>
struct GradOfRow {
  using A = Acc<T>;
  A scale, uniform, at_target, lse;
  const A* w;
  int64_t t;
  bool ignored;

  __device__ __forceinline__ A operator()(int64_t c, A v) const {
    if (ignored) return A(0);
    // fma spelled out: left to the compiler, its contraction differs between the kernels that
    // inline this, and so would the gradient's bits with the sums and without.
    const A r = fma(exp_minus_as<T>(v, lse), scale, -(uniform * (w ? w[c] : A(1))));
    return c == t ? r - at_target : r;
  }
};

template <class T>
__device__ __forceinline__ GradOfRow<T> grad_of_row(const GradArgs<T>& a, int64_t p) {
  using A = Acc<T>;
  const int64_t t = a.target[p];
  if (t == a.ignore_index || !is_class(t, a.nc)) return {A(0), A(0), A(0), A(0), nullptr, t, true};
  const A ge = a.ge[a.ge_scalar ? 0 : p], wt = a.w ? a.w[t] : A(1);
  const A wsum = a.wsum ? *a.wsum : static_cast<A>(a.nc);
  return {ge * (a.keep * wt + a.u * wsum), ge * a.u, ge * a.keep * wt, a.lse[p], a.w, t, false};
}

// D == 1: a group of threads per row (no reduction: the group only shapes the 16-byte accesses);
// gx's rows ldg apart, the input's ldx.
template <class T, int VEC, bool kWarpPerRow>
__global__ void cross_entropy_backward_rows_kernel(T* gx, int64_t ldg, const T* in, int64_t ldx, int64_t rows,
                                                   GradArgs<T> args) {
  const int g = kWarpPerRow ? kWarpSize : blockDim.x;
  const int t = kWarpPerRow ? threadIdx.x % kWarpSize : threadIdx.x;
  const int64_t per_block = kWarpPerRow ? blockDim.x / kWarpSize : 1;
  for (int64_t row = blockIdx.x * per_block + (kWarpPerRow ? threadIdx.x / kWarpSize : 0); row < rows;
       row += gridDim.x * per_block)
    map_row<T, VEC>(in + row * ldx, gx + row * ldg, args.nc, t, g, grad_of_row(args, row));
}

// D == 1 with gx's sums over rows (the bias gradient of the linear before it): a block of
// kRowSumsThreads per SM walks every gridDim.x-th row. gx's rows are 16-byte aligned and a multiple
// of 16 bytes apart, so a thread meets the same columns in every row and adds its stored values into
// its own slots of nc sums in shared memory, without atomics. Slot of column c: (c % VEC) * nvec +
// c / VEC over the vectors, so that a warp's lanes (neighbouring vectors) hit neighbouring banks; c
// for the tail. A thread loads kLoads vectors before it computes any: at one block an SM, a vector at
// a time left the loads' latency bare (H100: 239 us over BERT's head against the rows kernel's 171).
// partial[blockIdx.x] gets the block's sums, which launch_column_sums adds. The sums read the values
// as stored, so they match a sum of gx.
constexpr int kRowSumsThreads = 1024;

template <class T, int VEC>
__global__ void __launch_bounds__(kRowSumsThreads)
    cross_entropy_backward_sums_kernel(T* gx, int64_t ldg, Acc<T>* partial, const T* in, int64_t ldx,
                                       int64_t rows, GradArgs<T> args) {
  using A = Acc<T>;
  using V = Vec<T, VEC>;
  constexpr int kLoads = 4;
  extern __shared__ unsigned char smem[];
  A* sums = reinterpret_cast<A*>(smem);
  const int64_t nc = args.nc, nvec = nc / VEC;
  const int t = threadIdx.x, g = blockDim.x;
  for (int64_t c = t; c < nc; c += g) sums[c] = A(0);
  __syncthreads();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const GradOfRow<T> f = grad_of_row(args, row);
    const T* x = in + row * ldx;
    const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(x) % 16 / sizeof(T));
    const V* vin = reinterpret_cast<const V*>(x - shift);
    V* vout = reinterpret_cast<V*>(gx + row * ldg);
    for (int64_t first = t; first < nvec; first += kLoads * g) {
      V xv[kLoads];
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        const int64_t v = first + k * g;
        if (v < nvec) xv[k] = shift == 0 ? vin[v] : splice(vin[v], vin[v + 1], shift);
      }
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        const int64_t v = first + k * g;
        if (v >= nvec) break;
        V y;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          y.v[j] = from_acc<T>(f(v * VEC + j, to_acc(xv[k].v[j])));
          sums[j * nvec + v] += to_acc(y.v[j]);
        }
        vout[v] = y;
      }
    }
    for (int64_t c = nvec * VEC + t; c < nc; c += g) {
      const T y = from_acc<T>(f(c, to_acc(x[c])));
      gx[row * ldg + c] = y;
      sums[c] += to_acc(y);
    }
  }
  __syncthreads();
  for (int64_t c = t; c < nc; c += g)
    partial[blockIdx.x * nc + c] = sums[c < nvec * VEC ? c % VEC * nvec + c / VEC : c];
}

// D > 1: one thread per element of gx [N, C, D]; 32-bit index arithmetic when the element count
// allows.
template <class T>
__global__ void cross_entropy_backward_kernel(T* gx, const T* in, int64_t n, int64_t D, GradArgs<T> args) {
  const int64_t nc = args.nc;
  const bool narrow = n <= static_cast<int64_t>(UINT32_MAX);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = narrow ? static_cast<uint32_t>(i) / static_cast<uint32_t>(D) : i / D;
    const int64_t row = narrow ? static_cast<uint32_t>(q) / static_cast<uint32_t>(nc) : q / nc;
    const int64_t c = q - row * nc;
    gx[i] = from_acc<T>(grad_of_row(args, row * D + (i - q * D))(c, to_acc(in[i])));
  }
}

void cross_entropy_backward_cuda(const Tensor& gx, const Tensor& sums, const Tensor& grad,
                                 const Tensor& input, const Tensor& lse, const Tensor& target,
                                 const Tensor& weight, const Tensor& weight_sum, int64_t ignore_index,
                                 double label_smoothing) {
  const int64_t N = input.size(0), nc = input.size(1), D = input.size(2);
  cudaStream_t stream = current_stream();
  visit_float_dtype("cross_entropy", gx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const GradArgs<T> args{static_cast<const A*>(grad.data_ptr()),
                           grad.numel() == 1,
                           static_cast<const A*>(lse.data_ptr()),
                           static_cast<const int64_t*>(target.data_ptr()),
                           weight.defined() ? static_cast<const A*>(weight.data_ptr()) : nullptr,
                           weight_sum.defined() ? static_cast<const A*>(weight_sum.data_ptr()) : nullptr,
                           nc,
                           ignore_index,
                           static_cast<A>(1 - label_smoothing),
                           static_cast<A>(label_smoothing / static_cast<double>(nc))};
    auto* pgx = static_cast<T*>(gx.data_ptr());
    const auto* px = static_cast<const T*>(input.data_ptr());
    if (D > 1) {
      const int64_t n = gx.numel();
      cross_entropy_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(pgx, px, n, D, args);
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
    // Vectors whatever the rows' alignment (splicing the input's to gx's).
    constexpr int VEC = 16 / sizeof(T);
    const auto& props = get_device_properties();
    const size_t smem = static_cast<size_t>(nc) * sizeof(A);
    if (sums.defined() && reinterpret_cast<uintptr_t>(pgx) % 16 == 0 && gx.stride(0) * sizeof(T) % 16 == 0 &&
        smem <= props.shared_memory_per_block_optin) {
      const auto kernel = cross_entropy_backward_sums_kernel<T, VEC>;
      EMBER_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      const int64_t blocks = std::min<int64_t>(N, props.multi_processor_count);
      Tensor partial = empty({blocks, 1, nc}, sums.options());
      kernel<<<static_cast<unsigned>(blocks), kRowSumsThreads, smem, stream>>>(
          pgx, gx.stride(0), static_cast<A*>(partial.data_ptr()), px, input.stride(0), N, args);
      EMBER_CUDA_LAUNCH_CHECK();
      return launch_column_sums<A, A>({sums}, partial, blocks, nc, stream);
    }
    launch_rows<VEC>(N, nc, [&](auto warp_per_row, unsigned grid, int threads) {
      cross_entropy_backward_rows_kernel<T, VEC, decltype(warp_per_row)::value>
          <<<grid, threads, 0, stream>>>(pgx, gx.stride(0), px, input.stride(0), N, args);
    });
    if (sums.defined()) sums.copy_(gx.select(2, 0).sum({0}, false, sums.dtype()));
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
