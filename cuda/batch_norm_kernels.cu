// batch_norm's CUDA kernels, as PyTorch's: a per-channel reduction (training statistics, or the
// backward's sums of dy and dy * (x - mean)) as partials over splits of each channel and a merge
// kernel that writes the results (and the running stats, dw and db in their own dtypes), then
// one elementwise kernel (the output, or dx). x is a contiguous [A, C, B]: with B > 1 each
// channel is A planes of B elements (NCHW); with B = 1 (channels-last, or [N, C]) a channel is
// a column of the row-major [A, C], which a thread walks down holding VEC adjacent channels.
#include <algorithm>

#include "ember/core/factories.h"
#include "ember/core/ops/normalization.h"
#include "ember/cuda/device.h"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMergeThreads = 128;

// Element i of a floating tensor of runtime dtype `dt` set to v.
template <class A>
__device__ __forceinline__ void store_float_as(void* p, ScalarType dt, int64_t i, A v) {
  switch (dt) {
    case ScalarType::Float16:
      static_cast<Half*>(p)[i] = from_acc<Half>(static_cast<float>(v));
      break;
    case ScalarType::BFloat16:
      static_cast<BFloat16*>(p)[i] = from_acc<BFloat16>(static_cast<float>(v));
      break;
    case ScalarType::Float32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(p)[i] = static_cast<double>(v);
  }
}

// VEC elements at p (aligned to the vector) in the accumulate type.
template <class T, int VEC>
__device__ __forceinline__ void load_acc(const T* p, Acc<T> (&out)[VEC]) {
  const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = to_acc(v.v[j]);
}

// A channel's forward scale, invstd * weight, as the forward computes it.
template <class A>
__device__ __forceinline__ A channel_scale(const A* invstd, const void* weight, ScalarType weight_dtype,
                                           int64_t c) {
  return weight ? invstd[c] * load_float_as<A>(weight, weight_dtype, c) : invstd[c];
}

// The forward's affine map (x - mean) * scale + shift, contracted explicitly: the backward's
// ReLU mask recomputes it and must see the very value the forward rounded.
template <class A>
__device__ __forceinline__ A channel_affine(A x, A mean, A scale, A shift) {
  return fma(x - mean, scale, shift);
}

// --- Reductions. An Op says what a channel accumulates: State (with identity, shfl_xor and the
// Combine functor), Channel (per-channel constants, from channel(c)), add_plane (VEC values of
// one channel), add_rows (R rows of VEC channels: value [i][j] belongs to channel c0 + j; all VEC
// states have seen the same number of values; kRows at a time in column reductions), its kFields
// partial values and finish(c, state), the merge's output. ---

struct NoConstants {};

// Training statistics: Welford moments; the merge writes mean, invstd and the running stats.
template <class A>
struct StatsOp {
  using State = Welford<A>;
  using Combine = WelfordCombine;
  using Channel = NoConstants;
  // Four rows at once: one load per row left the reduction at half the bandwidth.
  static constexpr int kInputs = 1, kFields = 3, kRows = 4;
  A* mean;
  A* invstd;
  void* running_mean;
  void* running_var;
  ScalarType running_dtype;
  A momentum, eps;

  __device__ Channel channel(int64_t) const { return {}; }
  // The vector's own mean and squared deviations (exact), merged in: one division per vector.
  template <int VEC>
  __device__ void add_plane(State& s, const Channel&, const A (&x)[VEC], const A (&)[VEC]) const {
    A sum = A(0), m2 = A(0);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum += x[j];
    const A mv = sum * (A(1) / A(VEC));
#pragma unroll
    for (int j = 0; j < VEC; ++j) m2 += (x[j] - mv) * (x[j] - mv);
    s = Combine{}(s, State{mv, m2, A(VEC)});
  }
  // The R rows' own mean and squared deviations per channel (exact), merged in (Chan et al.):
  // one division for the R * VEC values, and short dependency chains.
  template <int R, int VEC>
  __device__ void add_rows(State (&s)[VEC], const Channel (&)[VEC], const A (&x)[R][VEC],
                           const A (&)[R][VEC]) const {
    const A n = s[0].n + A(R), wb = A(R) / n;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A sum = A(0), m2 = A(0);
#pragma unroll
      for (int i = 0; i < R; ++i) sum += x[i][j];
      const A gm = sum * (A(1) / A(R));
#pragma unroll
      for (int i = 0; i < R; ++i) m2 += (x[i][j] - gm) * (x[i][j] - gm);
      const A d = gm - s[j].mean;
      s[j].mean += d * wb;
      s[j].m2 += m2 + d * d * s[j].n * wb;
      s[j].n = n;
    }
  }
  __device__ void store(A* p, int64_t k, int64_t stride, const State& s) const {
    p[k] = s.mean, p[stride + k] = s.m2, p[2 * stride + k] = s.n;
  }
  __device__ State load(const A* p, int64_t k, int64_t stride) const {
    return {p[k], p[stride + k], p[2 * stride + k]};
  }
  __device__ void finish(int64_t c, const State& s) const {
    const A var = s.m2 / s.n;
    mean[c] = s.n > A(0) ? s.mean : ::cuda::std::numeric_limits<A>::quiet_NaN();
    invstd[c] = A(1) / sqrt(var + eps);
    if (!running_mean) return;
    const A rm = load_float_as<A>(running_mean, running_dtype, c);
    const A rv = load_float_as<A>(running_var, running_dtype, c);
    store_float_as(running_mean, running_dtype, c, (A(1) - momentum) * rm + momentum * mean[c]);
    store_float_as(running_var, running_dtype, c,
                   (A(1) - momentum) * rv + momentum * var * s.n / (s.n - A(1)));
  }
};

// The backward's sums: a = sum(dy), b = sum(dy * (x - mean)).
template <class A>
struct GradSums {
  A a, b;
  __device__ static GradSums identity() { return {A(0), A(0)}; }
  __device__ GradSums shfl_xor(int offset) const {
    return {cuda::shfl_xor(a, offset), cuda::shfl_xor(b, offset)};
  }
};

struct GradSumsCombine {
  template <class A>
  __device__ GradSums<A> operator()(const GradSums<A>& x, const GradSums<A>& y) const {
    return {x.a + y.a, x.b + y.b};
  }
};

// Inputs dy and x; the merge writes sum_dy, sum_dy_xmu and (when wanted) dw and db. With relu,
// dy counts where the forward's output (channel_affine, then rounded to x's dtype) was positive.
template <class A>
struct GradOp {
  using State = GradSums<A>;
  using Combine = GradSumsCombine;
  struct Channel {
    A mean, scale, shift;
  };
  // Two inputs and the mask's constants: one row at a time (four were slower).
  static constexpr int kInputs = 2, kFields = 2, kRows = 1;
  const A* mean;
  const A* invstd;
  A* sum_dy;
  A* sum_dy_xmu;
  void* dw;
  void* db;
  ScalarType dw_dtype, db_dtype;
  const void* weight;
  const void* bias;
  ScalarType weight_dtype, bias_dtype;
  bool relu;
  A relu_bound;

  __device__ Channel channel(int64_t c) const {
    if (!relu) return {mean[c], A(0), A(0)};
    return {mean[c], channel_scale(invstd, weight, weight_dtype, c),
            bias ? load_float_as<A>(bias, bias_dtype, c) : A(0)};
  }
  __device__ A masked(const Channel& k, A g, A x) const {
    return relu && !(channel_affine(x, k.mean, k.scale, k.shift) > relu_bound) ? A(0) : g;
  }
  template <int VEC>
  __device__ void add_plane(State& s, const Channel& k, const A (&g)[VEC], const A (&x)[VEC]) const {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A gj = masked(k, g[j], x[j]);
      s.a += gj, s.b += gj * (x[j] - k.mean);
    }
  }
  template <int R, int VEC>
  __device__ void add_rows(State (&s)[VEC], const Channel (&k)[VEC], const A (&g)[R][VEC],
                           const A (&x)[R][VEC]) const {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A gij = masked(k[j], g[i][j], x[i][j]);
        s[j].a += gij, s[j].b += gij * (x[i][j] - k[j].mean);
      }
  }
  __device__ void store(A* p, int64_t k, int64_t stride, const State& s) const {
    p[k] = s.a, p[stride + k] = s.b;
  }
  __device__ State load(const A* p, int64_t k, int64_t stride) const { return {p[k], p[stride + k]}; }
  __device__ void finish(int64_t c, const State& s) const {
    sum_dy[c] = s.a, sum_dy_xmu[c] = s.b;
    if (dw) store_float_as(dw, dw_dtype, c, s.b * invstd[c]);
    if (db) store_float_as(db, db_dtype, c, s.a);
  }
};

// Block (c, s): channel c over the s-th chunk of its A * B / VEC vectors (B % VEC == 0, so a
// vector lies in one plane). partial is [kFields][C][splits].
template <class T, int VEC, class Op>
__global__ void plane_reduce_kernel(Acc<T>* partial, const T* x, const T* y, int64_t C, int64_t B,
                                    int64_t nvec, int64_t chunk, Op op) {
  using A = Acc<T>;
  using S = typename Op::State;
  __shared__ S shared[kWarpSize];
  const int64_t c = blockIdx.x, splits = gridDim.y, plane_vecs = B / VEC;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < nvec ? begin + chunk : nvec;
  const bool narrow = nvec <= static_cast<int64_t>(UINT32_MAX);
  const typename Op::Channel k = op.channel(c);
  S st = S::identity();
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const int64_t a = narrow ? static_cast<uint32_t>(j) / static_cast<uint32_t>(plane_vecs) : j / plane_vecs;
    const int64_t off = (a * C + c) * B + (j - a * plane_vecs) * VEC;
    A xs[VEC], ys[VEC];
    load_acc<T, VEC>(x + off, xs);
    if constexpr (Op::kInputs == 2) load_acc<T, VEC>(y + off, ys);
    op.template add_plane<VEC>(st, k, xs, ys);
  }
  st = block_allreduce(st, typename Op::Combine{}, shared);
  if (threadIdx.x == 0) op.store(partial, c * splits + blockIdx.y, C * splits, st);
}

// Threads (tx, ty) of block (i, s): thread x holds channels [c0, c0 + VEC) of the i-th column
// tile and walks down rows ty apart within the s-th chunk of rows, Op::kRows rows' loads in
// flight at a time; the ty partials are then combined in a fixed tree (C % VEC == 0, ty a power of 2).
template <class T, int VEC, class Op>
__global__ void column_reduce_kernel(Acc<T>* partial, const T* x, const T* y, int64_t rows, int64_t C,
                                     int64_t chunk, Op op) {
  using A = Acc<T>;
  using S = typename Op::State;
  __shared__ S shared[kThreads * VEC];
  const int64_t c0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * VEC;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < rows ? begin + chunk : rows;
  const bool active = c0 < C;
  S st[VEC];
  typename Op::Channel k[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    st[j] = S::identity();
    if (active) k[j] = op.channel(c0 + j);
  }
  auto load_and_add = [&]<int R>(int64_t r, int64_t step) {
    A xs[R][VEC], ys[R][VEC];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      load_acc<T, VEC>(x + (r + i * step) * C + c0, xs[i]);
      if constexpr (Op::kInputs == 2) load_acc<T, VEC>(y + (r + i * step) * C + c0, ys[i]);
    }
    op.template add_rows<R, VEC>(st, k, xs, ys);
  };
  if (active) {
    const int64_t step = blockDim.y;
    int64_t r = begin + threadIdx.y;
    constexpr int R = Op::kRows;
    for (; r + (R - 1) * step < end; r += R * step) load_and_add.template operator()<R>(r, step);
    if constexpr (R > 1)
      for (; r < end; r += step) load_and_add.template operator()<1>(r, step);
  }
  const int lin = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < VEC; ++j) shared[lin * VEC + j] = st[j];
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half && active) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        st[j] = typename Op::Combine{}(st[j],
                                       shared[((threadIdx.y + half) * blockDim.x + threadIdx.x) * VEC + j]);
        shared[lin * VEC + j] = st[j];
      }
    }
    __syncthreads();
  }
  if (threadIdx.y != 0 || !active) return;
  const int64_t splits = gridDim.y;
#pragma unroll
  for (int j = 0; j < VEC; ++j) op.store(partial, (c0 + j) * splits + blockIdx.y, C * splits, st[j]);
}

// Block c merges channel c's partials (threads across the splits, then a fixed-order tree) and
// writes its results.
template <class A, class Op>
__global__ void channel_merge_kernel(const A* partial, int64_t C, int64_t splits, Op op) {
  using S = typename Op::State;
  __shared__ S shared[kWarpSize];
  const int64_t c = blockIdx.x;
  S st = S::identity();
  for (int64_t s = threadIdx.x; s < splits; s += blockDim.x)
    st = typename Op::Combine{}(st, op.load(partial, c * splits + s, C * splits));
  st = block_allreduce(st, typename Op::Combine{}, shared);
  if (threadIdx.x == 0) op.finish(c, st);
}

// Partials over splits of each channel of x [A, C, B] (and y, for two-input ops), then the merge.
template <class T, class Op>
void reduce_channels(const Tensor& x, const Tensor& y, const Op& op, const TensorOptions& acc_options) {
  using A = Acc<T>;
  const int64_t outer = x.size(0), C = x.size(1), B = x.size(2);
  const T* px = static_cast<const T*>(x.data_ptr());
  const T* py = y.defined() ? static_cast<const T*>(y.data_ptr()) : nullptr;
  cudaStream_t stream = current_stream();
  Tensor partial;
  int64_t splits = 1;
  // About kTargetBlocks blocks, each with at least `per_thread` vectors or rows per thread.
  auto split = [&](int64_t tiles, int64_t len, int64_t per_block) {
    splits =
        std::clamp<int64_t>(std::min(kTargetBlocks / tiles, ceil_div<int64_t>(len, per_block)), 1, 65535);
    const int64_t chunk = ceil_div<int64_t>(len, splits);
    splits = ceil_div<int64_t>(len, chunk);
    partial = empty({Op::kFields, C, splits}, acc_options);
    return chunk;
  };
  if (B > 1) {
    with_vector_width<T>(B, {px, py}, [&](auto vec) {
      constexpr int VEC = decltype(vec)::value;
      const int64_t nvec = outer * B / VEC, chunk = split(C, nvec, 4 * kThreads);
      plane_reduce_kernel<T, VEC, Op>
          <<<dim3(static_cast<unsigned>(C), static_cast<unsigned>(splits)), kThreads, 0, stream>>>(
              static_cast<A*>(partial.data_ptr()), px, py, C, B, nvec, chunk, op);
    });
  } else {
    with_vector_width<T>(C, {px, py}, [&](auto vec) {
      constexpr int VEC = decltype(vec)::value;
      const int64_t cols = ceil_div<int64_t>(C, VEC);
      const int tx = pow2_ceil(cols, kWarpSize), ty = kThreads / tx;
      const int64_t tiles = ceil_div<int64_t>(cols, tx), chunk = split(tiles, outer, 8 * ty);
      column_reduce_kernel<T, VEC, Op>
          <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), dim3(tx, ty), 0, stream>>>(
              static_cast<A*>(partial.data_ptr()), px, py, outer, C, chunk, op);
    });
  }
  EMBER_CUDA_LAUNCH_CHECK();
  channel_merge_kernel<A, Op><<<static_cast<unsigned>(C), kMergeThreads, 0, stream>>>(
      static_cast<const A*>(partial.data_ptr()), C, splits, op);
  EMBER_CUDA_LAUNCH_CHECK();
}

// Eval: mean and invstd of the running stats, a thread per channel.
template <class A>
__global__ void running_stats_kernel(A* mean, A* invstd, const void* running_mean, const void* running_var,
                                     ScalarType dt, int64_t C, A eps) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  mean[c] = load_float_as<A>(running_mean, dt, c);
  invstd[c] = A(1) / sqrt(load_float_as<A>(running_var, dt, c) + eps);
}

void batch_norm_stats_cuda(const Tensor& mean, const Tensor& invstd, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& x, double momentum, double eps) {
  const int64_t C = mean.size(0);
  visit_compute_dtype("batch_norm_stats", mean.dtype(), [&](auto acc) {
    using A = decltype(acc);
    auto* pm = static_cast<A*>(mean.data_ptr());
    auto* pi = static_cast<A*>(invstd.data_ptr());
    const ScalarType rdt = running_mean.defined() ? running_mean.dtype() : mean.dtype();
    if (!x.defined()) {
      running_stats_kernel<A><<<grid_for(C, kThreads), kThreads, 0, current_stream()>>>(
          pm, pi, running_mean.data_ptr(), running_var.data_ptr(), rdt, C, static_cast<A>(eps));
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
    const StatsOp<A> op{pm,
                        pi,
                        running_mean.defined() ? running_mean.data_ptr() : nullptr,
                        running_var.defined() ? running_var.data_ptr() : nullptr,
                        rdt,
                        static_cast<A>(momentum),
                        static_cast<A>(eps)};
    visit_float_dtype("batch_norm_stats", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<Acc<T>, A>) reduce_channels<T>(x, Tensor(), op, mean.options());
    });
  });
}

// A defined tensor's data and dtype; null and `fallback` for an undefined one.
std::pair<void*, ScalarType> data_and_dtype(const Tensor& t, ScalarType fallback) {
  return t.defined() ? std::pair{t.data_ptr(), t.dtype()} : std::pair{nullptr, fallback};
}

void batch_norm_backward_reduce_cuda(const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& dw,
                                     const Tensor& db, const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                                     bool relu) {
  visit_float_dtype("batch_norm_backward_reduce", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const auto [pdw, dw_dtype] = data_and_dtype(dw, mean.dtype());
    const auto [pdb, db_dtype] = data_and_dtype(db, mean.dtype());
    const auto [pw, w_dtype] = data_and_dtype(weight, mean.dtype());
    const auto [pb, b_dtype] = data_and_dtype(bias, mean.dtype());
    const GradOp<A> op{static_cast<const A*>(mean.data_ptr()),
                       static_cast<const A*>(invstd.data_ptr()),
                       static_cast<A*>(sum_dy.data_ptr()),
                       static_cast<A*>(sum_dy_xmu.data_ptr()),
                       pdw,
                       pdb,
                       dw_dtype,
                       db_dtype,
                       pw,
                       pb,
                       w_dtype,
                       b_dtype,
                       relu,
                       static_cast<A>(relu_zero_bound(x.dtype()))};
    reduce_channels<T>(dy, x, op, mean.options());
  });
}

// --- Elementwise, with per-channel coefficients. The forward is (x - mean) * invstd * w + b, plus
// the residual in1 when there is one, then the ReLU when asked; the backward's dx is (dy -
// mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))) * invstd * w through batch statistics,
// dy * invstd * w through constant ones: (in0 - p - (in1 - m) * q) * sc, with in1 = x. With relu,
// the backward's dy first takes the ReLU's mask, recomputed from x (in1) as GradOp's. The pass
// is a template argument: one kernel for all three took the registers of the largest (72 against
// 47 for the forward), and a quarter of the forward's occupancy. ---

enum class Pass { kForward, kBackward, kBackwardRelu };

template <class A>
struct ChannelCoef {
  A p, m, q, sc, b;
};

template <class A>
struct ElemtArgs {
  const A* mean;
  const A* invstd;
  const void* weight;
  const void* bias;
  ScalarType weight_dtype, bias_dtype;
  bool relu;        // the forward's
  const A* sum_dy;  // backward through batch statistics when set
  const A* sum_dy_xmu;
  A inv_count, relu_bound;

  template <Pass P>
  __device__ ChannelCoef<A> at(int64_t c) const {
    const A sc = channel_scale(invstd, weight, weight_dtype, c);
    const A b = P != Pass::kBackward && bias ? load_float_as<A>(bias, bias_dtype, c) : A(0);
    if (P == Pass::kForward || !sum_dy) return {A(0), mean[c], A(0), sc, b};
    return {sum_dy[c] * inv_count, mean[c], invstd[c] * invstd[c] * sum_dy_xmu[c] * inv_count, sc, b};
  }
};

// kTwo: in1 enters (the residual, or x in the backward).
template <bool kTwo, Pass P, class A>
__device__ __forceinline__ A apply(const ElemtArgs<A>& args, const ChannelCoef<A>& k, A v0, A v1) {
  if constexpr (P == Pass::kForward) {
    const A y = channel_affine(v0, k.m, k.sc, k.b) + (kTwo ? v1 : A(0));
    return args.relu && y <= A(0) ? A(0) : y;  // a NaN stays NaN, as relu's
  } else {
    if constexpr (P == Pass::kBackwardRelu)
      if (!(channel_affine(v1, k.m, k.sc, k.b) > args.relu_bound)) v0 = A(0);
    return (kTwo && args.sum_dy ? v0 - k.p - (v1 - k.m) * k.q : v0) * k.sc;
  }
}

// Flat over [A, C, B] in vectors (B % VEC == 0: a vector lies in one channel).
template <class T, int VEC, bool kTwo, Pass P>
__global__ void plane_elemt_kernel(T* out, const T* in0, const T* in1, int64_t nvec, int64_t C, int64_t B,
                                   ElemtArgs<Acc<T>> args) {
  using A = Acc<T>;
  using V = Vec<T, VEC>;
  const bool narrow = nvec <= static_cast<int64_t>(UINT32_MAX);
  const int64_t plane_vecs = B / VEC;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < nvec;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t plane =
        narrow ? static_cast<uint32_t>(v) / static_cast<uint32_t>(plane_vecs) : v / plane_vecs;
    const int64_t c = narrow ? static_cast<uint32_t>(plane) % static_cast<uint32_t>(C) : plane % C;
    const ChannelCoef<A> k = args.template at<P>(c);
    A v0[VEC], v1[VEC];
    load_acc<T, VEC>(in0 + v * VEC, v0);
    if constexpr (kTwo) load_acc<T, VEC>(in1 + v * VEC, v1);
    V o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(apply<kTwo, P>(args, k, v0[j], kTwo ? v1[j] : A(0)));
    reinterpret_cast<V*>(out)[v] = o;
  }
}

// Rows of [A, C] (B = 1): a thread keeps the coefficients of channels [c0, c0 + VEC) in
// registers and walks down the rows (C % VEC == 0).
template <class T, int VEC, bool kTwo, Pass P>
__global__ void column_elemt_kernel(T* out, const T* in0, const T* in1, int64_t rows, int64_t C,
                                    ElemtArgs<Acc<T>> args) {
  using A = Acc<T>;
  using V = Vec<T, VEC>;
  const int64_t c0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * VEC;
  if (c0 >= C) return;
  ChannelCoef<A> k[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) k[j] = args.template at<P>(c0 + j);
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    A v0[VEC], v1[VEC];
    load_acc<T, VEC>(in0 + r * C + c0, v0);
    if constexpr (kTwo) load_acc<T, VEC>(in1 + r * C + c0, v1);
    V o;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      o.v[j] = from_acc<T>(apply<kTwo, P>(args, k[j], v0[j], kTwo ? v1[j] : A(0)));
    *reinterpret_cast<V*>(out + r * C + c0) = o;
  }
}

template <class T, Pass P>
void launch_elemt(const Tensor& out, const Tensor& in0, const Tensor& in1, const ElemtArgs<Acc<T>>& args) {
  const int64_t outer = in0.size(0), C = in0.size(1), B = in0.size(2);
  T* po = static_cast<T*>(out.data_ptr());
  const T* p0 = static_cast<const T*>(in0.data_ptr());
  const T* p1 = in1.defined() ? static_cast<const T*>(in1.data_ptr()) : nullptr;
  cudaStream_t stream = current_stream();
  auto run = [&](auto two) {
    constexpr bool kTwo = decltype(two)::value;
    if (B > 1) {
      with_vector_width<T>(B, {po, p0, p1}, [&](auto vec) {
        constexpr int VEC = decltype(vec)::value;
        const int64_t nvec = outer * C * B / VEC;
        plane_elemt_kernel<T, VEC, kTwo, P>
            <<<grid_for(nvec, kThreads), kThreads, 0, stream>>>(po, p0, p1, nvec, C, B, args);
      });
    } else {
      with_vector_width<T>(C, {po, p0, p1}, [&](auto vec) {
        constexpr int VEC = decltype(vec)::value;
        const int64_t cols = ceil_div<int64_t>(C, VEC);
        const int tx = pow2_ceil(cols, kWarpSize), ty = kThreads / tx;
        // At least 4 rows per thread.
        const int64_t row_blocks = std::clamp<int64_t>(ceil_div<int64_t>(outer, 4 * ty), 1, 65535);
        column_elemt_kernel<T, VEC, kTwo, P>
            <<<dim3(static_cast<unsigned>(ceil_div<int64_t>(cols, tx)), static_cast<unsigned>(row_blocks)),
               dim3(tx, ty), 0, stream>>>(po, p0, p1, outer, C, args);
      });
    }
    EMBER_CUDA_LAUNCH_CHECK();
  };
  if (p1)
    run(std::true_type{});
  else if constexpr (P != Pass::kBackwardRelu)  // which reads x
    run(std::false_type{});
}

// ElemtArgs of the forward (sum_dy undefined) or the backward, for x's dtype T.
template <class T>
ElemtArgs<Acc<T>> elemt_args(const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             const Tensor& bias, bool relu, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                             double inv_count) {
  using A = Acc<T>;
  return {static_cast<const A*>(mean.data_ptr()),
          static_cast<const A*>(invstd.data_ptr()),
          weight.defined() ? weight.data_ptr() : nullptr,
          bias.defined() ? bias.data_ptr() : nullptr,
          weight.defined() ? weight.dtype() : mean.dtype(),
          bias.defined() ? bias.dtype() : mean.dtype(),
          relu,
          sum_dy.defined() ? static_cast<const A*>(sum_dy.data_ptr()) : nullptr,
          sum_dy_xmu.defined() ? static_cast<const A*>(sum_dy_xmu.data_ptr()) : nullptr,
          static_cast<A>(inv_count),
          static_cast<A>(relu_zero_bound(dtype_of<T>))};
}

void batch_norm_elemt_cuda(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& bias, const Tensor& residual, bool relu) {
  visit_float_dtype("batch_norm_elemt", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_elemt<T, Pass::kForward>(out, x, residual,
                                    elemt_args<T>(mean, invstd, weight, bias, relu, {}, {}, 0));
  });
}

void batch_norm_backward_elemt_cuda(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& mean,
                                    const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                                    const Tensor& sum_dy, const Tensor& sum_dy_xmu, double inv_count,
                                    bool relu) {
  visit_float_dtype("batch_norm_backward_elemt", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto args = elemt_args<T>(mean, invstd, weight, bias, relu, sum_dy, sum_dy_xmu, inv_count);
    if (relu)
      launch_elemt<T, Pass::kBackwardRelu>(dx, dy, x, args);
    else
      launch_elemt<T, Pass::kBackward>(dx, dy, sum_dy.defined() ? x : Tensor(), args);
  });
}

KernelRegistrar<BatchNormStatsFn> reg_batch_norm_stats(batch_norm_stats_stub, kCUDA, &batch_norm_stats_cuda);
KernelRegistrar<BatchNormElemtFn> reg_batch_norm_elemt(batch_norm_elemt_stub, kCUDA, &batch_norm_elemt_cuda);
KernelRegistrar<BatchNormBackwardReduceFn> reg_batch_norm_backward_reduce(batch_norm_backward_reduce_stub,
                                                                          kCUDA,
                                                                          &batch_norm_backward_reduce_cuda);
KernelRegistrar<BatchNormBackwardElemtFn> reg_batch_norm_backward_elemt(batch_norm_backward_elemt_stub, kCUDA,
                                                                        &batch_norm_backward_elemt_cuda);

}  // namespace
}  // namespace ember::cuda
