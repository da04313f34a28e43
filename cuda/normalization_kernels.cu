// CUDA kernels of the normalization family. layer_norm and row_moments: each row read once into
// registers (a warp per row up to 1024 elements, a block per row up to 32768, 16-byte loads) for
// its mean and variance, then normalized and mapped by the affine weights from there; its
// backward likewise (or a block per tile of rows), dw and db summed per block. channel_affine
// (group_norm's last step): one fused multiply-add per element.
#include <algorithm>

#include "ember/core/factories.h"
#include "ember/core/ops/normalization.h"
#include "ember/cuda/device.h"
#include "ember/cuda/layer_norm_util.cuh"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kMomentThreads = 256;

template <class A>
__device__ __forceinline__ A quiet_nan() {
  return ::cuda::std::numeric_limits<A>::quiet_NaN();
}

// y = (x - mean) * rstd [* w] [+ b]: the CPU kernel's order of operations; w and b of type P.
template <class A, class P>
struct Normalize {
  A mean, rstd;
  const P* w;
  const P* b;
  __device__ A operator()(int64_t i, A x) const {
    A y = (x - mean) * rstd;
    if (w) y *= to_acc(w[i]);
    if (b) y += to_acc(b[i]);
    return y;
  }
};

// Rows of N contiguous elements, split as RowSplit S says; `out` null computes the moments only
// (row_moments). A row in registers gets its mean, then the sum of squared deviations from it
// (exact, and no division per element as in Welford's update); a longer row Welford moments,
// then a second read. w and b are of type P.
template <class T, class P, int VEC, RowSplit S>
__global__ void layer_norm_kernel(T* out, Acc<T>* mean, Acc<T>* rstd, const T* x, const P* w, const P* b,
                                  int64_t rows, int64_t N, double eps) {
  using A = Acc<T>;
  using R = RowRegs<T, VEC>;
  __shared__ Welford<A> shared[kWarpSize];
  __shared__ A shared_acc[kWarpSize];
  const RowGroup<S> grp;
  const int64_t nvec = N / VEC;
  wait_for_prior_grids();  // launched by launch_dependent
  for (int64_t row = grp.first; row < rows; row += grp.step) {
    const T* xr = x + row * N;
    A mu, m2;
    R r;
    if constexpr (S == RowSplit::kBlockTwoPass) {
      Welford<A> st = Welford<A>::identity();
      for_each_in_row<T, VEC>(xr, N, grp.t, grp.g, [&](int64_t, A v) { st.add(v); });
      st = grp.allreduce(st, WelfordCombine{}, shared);
      // An empty row has mean 0 / 0, as on the CPU.
      mu = N > 0 ? st.mean : quiet_nan<A>();
      m2 = st.m2;
    } else {
      r.load(xr, nvec, grp.t, grp.g);
      A sum = A(0), sq = A(0);
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += r.at(k, j);
      });
      mu = grp.allreduce(sum, SumOp{}, A(0), shared_acc) / static_cast<A>(N);  // 0 / 0 for an empty row
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) sq += (r.at(k, j) - mu) * (r.at(k, j) - mu);
      });
      m2 = grp.allreduce(sq, SumOp{}, A(0), shared_acc);
    }
    const A rs = A(1) / sqrt(m2 / static_cast<A>(N) + static_cast<A>(eps));
    if (grp.t == 0) mean[row] = mu, rstd[row] = rs;
    if (!out) continue;
    if constexpr (S == RowSplit::kBlockTwoPass) {
      map_row<T, VEC>(xr, out + row * N, N, grp.t, grp.g, Normalize<A, P>{mu, rs, w, b});
    } else {
      auto* po = reinterpret_cast<Vec<T, VEC>*>(out + row * N);
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t v) {
        Vec<P, VEC> wv, bv;
        if (w) wv = load_columns<VEC>(w, v * VEC);
        if (b) bv = load_columns<VEC>(b, v * VEC);
        Vec<T, VEC> o;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          A y = (r.at(k, j) - mu) * rs;
          if (w) y *= to_acc(wv.v[j]);
          if (b) y += to_acc(bv.v[j]);
          o.v[j] = from_acc<T>(y);
        }
        po[v] = o;
      });
    }
  }
}

template <class T, class P>
void launch_layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, double eps) {
  using A = Acc<T>;
  const int64_t rows = x.size(0), N = x.size(1);
  T* po = out.defined() ? static_cast<T*>(out.data_ptr()) : nullptr;
  const T* px = static_cast<const T*>(x.data_ptr());
  auto* pm = static_cast<A*>(mean.data_ptr());
  auto* pr = static_cast<A*>(rstd.data_ptr());
  const P* pw = w.defined() ? static_cast<const P*>(w.data_ptr()) : nullptr;
  const P* pb = b.defined() ? static_cast<const P*>(b.data_ptr()) : nullptr;
  cudaStream_t stream = current_stream();
  with_vector_width<T>(N, {po, px, pw, pb}, [&](auto vec) {
    launch_row_kernel<T>(
        rows, N, kWarpsPerBlock,
        [](auto split) { return layer_norm_kernel<T, P, decltype(vec)::value, decltype(split)::value>; },
        [&](auto kernel, auto, unsigned grid, int threads) {
          launch_dependent(kernel, dim3(grid), dim3(threads), stream, po, pm, pr, px, pw, pb, rows, N, eps);
        });
  });
}

void layer_norm_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                     const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor& param = weight.defined() ? weight : bias;
  visit_float_dtype("layer_norm", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_param_type<T>(param.defined() ? param.dtype() : x.dtype(), [&](auto ptag) {
      launch_layer_norm<T, decltype(ptag)>(out, mean, rstd, x, weight, bias, eps);
    });
  });
}

void row_moments_cuda(const Tensor& mean, const Tensor& rstd, const Tensor& x, double eps) {
  visit_float_dtype("row_moments", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_layer_norm<T, T>(Tensor(), mean, rstd, x, {}, {}, eps);
  });
}

// --- layer_norm backward. Rows that fit a warp's registers: for 2-byte dtypes a warp per row
// (layer_norm_backward_warp_kernel), each lane adding its columns' terms of dw and db in shared
// memory; for 4- and 8-byte dtypes a block per tile of kTileRows rows, a thread holding the same
// vector of columns in each row and adding its terms in registers (measured on the H200 over
// [32768, 1024]: f32 forward + backward 7% faster in tiles, bf16 2-11% slower in each variant
// tried). Longer rows: a block per row (in registers, column sums likewise), or read twice for dx
// with a separate kernel for dw and db. Each block leaves its column sums in a [blocks, 2, N]
// buffer that a last kernel adds up. ---

// Warps per block of the warp-per-row backward: each adds its column sums in 8 KB of shared memory.
constexpr int kBackwardWarps = 4;

// dw and db column sums of a warp-per-row block, in shared memory with a copy per warp: in
// registers they would take 64 of the kernel's registers and a third of the warps an SM holds.
// A thread owns its entries (no synchronization until the end); entries are 16-byte vectors
// with lanes fastest, so a warp's accesses do not conflict. [warp][dw, db][slot][part][lane].
template <class A, int VEC, int kSlots>
struct SharedColumnSums {
  static constexpr int kPer = VEC * sizeof(A) >= 16 ? static_cast<int>(16 / sizeof(A)) : VEC;
  static constexpr int kParts = VEC / kPer;
  static constexpr int kEntries = kSlots * kParts * kWarpSize;  // per warp and sum
  using E = Vec<A, kPer>;

  // This thread's entries in `all` (the block's), zeroed.
  __device__ static E* own(E* all) {
    E* mine = all + threadIdx.x / kWarpSize * 2 * kEntries + threadIdx.x % kWarpSize;
    E zero;
#pragma unroll
    for (int j = 0; j < kPer; ++j) zero.v[j] = A(0);
#pragma unroll
    for (int e = 0; e < 2 * kEntries; e += kWarpSize) mine[e] = zero;
    return mine;
  }

  // Adds a slot's VEC terms of each sum to the thread's entries.
  __device__ static void add(E* mine, int k, const A (&tw)[VEC], const A (&tb)[VEC]) {
#pragma unroll
    for (int q = 0; q < kParts; ++q) {
      E& ew = mine[(k * kParts + q) * kWarpSize];
      E& eb = mine[kEntries + (k * kParts + q) * kWarpSize];
      E w = ew, b = eb;
#pragma unroll
      for (int j = 0; j < kPer; ++j) w.v[j] += tw[q * kPer + j], b.v[j] += tb[q * kPer + j];
      ew = w, eb = b;
    }
  }

  // After a __syncthreads: the block's sums over its `warps`, in warp order (the result does not
  // vary from run to run), into out = [dw | db] of N columns.
  __device__ static void write(const E* all, int warps, A* out, int64_t N) {
    for (int e = threadIdx.x; e < 2 * kEntries; e += blockDim.x) {
      const int which = e / kEntries, lane = e % kWarpSize, kq = e % kEntries / kWarpSize;
      const int64_t c = (static_cast<int64_t>(kq / kParts) * kWarpSize + lane) * VEC + kq % kParts * kPer;
      if (c >= N) continue;
      E sum = all[e];
      for (int w = 1; w < warps; ++w) {
        const E& more = all[w * 2 * kEntries + e];
#pragma unroll
        for (int j = 0; j < kPer; ++j) sum.v[j] += more.v[j];
      }
#pragma unroll
      for (int j = 0; j < kPer; ++j) out[which * N + c + j] = sum.v[j];
    }
  }
};

// The warp-per-row backward of 2-byte rows of at most 1024 elements in vectors of VEC, persistent.
// Writes dx unless null, and with `partial` the block's sums of gy * xhat and gy per column into
// partial[blockIdx.x] = [dw | db]. The lane's w (of type P, 1 when null) stays in registers, x
// and dy as their packed words; pairs round to T in one instruction. Measured on the H200 over
// bf16 [32768, 1024] (ncu): 22.9 M warp instructions and 51.8 us, where the generic row kernel's
// warp split took 31.7 M and 60.1 us (27.2 M and 59.4 us with its w kept in registers too);
// fwd+bwd of unaligned rows [32768, 1022] 0.218 -> 0.160 ms, of dx alone 87.5 -> 85.8 us.
template <class T, class P, int VEC>
__global__ void __launch_bounds__(kBackwardWarps* kWarpSize)
    layer_norm_backward_warp_kernel(T* dx, float* partial, const T* gy, const T* x, const float* mean,
                                    const float* rstd, const P* w, int64_t rows, int64_t N) {
  constexpr int kSlots = kRowRegs<T> / VEC;  // vector v = lane + 32 k of each row
  using Shared = SharedColumnSums<float, VEC, kSlots>;
  using V = Vec<T, VEC>;
  __shared__ typename Shared::E shared_sums[kBackwardWarps * 2 * Shared::kEntries];
  typename Shared::E* own = partial ? Shared::own(shared_sums) : nullptr;
  wait_for_prior_grids();  // launched by launch_dependent
  const int lane = threadIdx.x % kWarpSize;
  const int64_t nvec = N / VEC;
  const float inv_n = 1.f / static_cast<float>(N);
  Vec<P, VEC> wk[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int64_t v = lane + k * kWarpSize;
    if (w && v < nvec) {
      wk[k] = load_columns<VEC>(w, v * VEC);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) wk[k].v[j] = from_acc<P>(1.f);
    }
  }
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kBackwardWarps) + threadIdx.x / kWarpSize; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kBackwardWarps) {
    const float mu = mean[row], rs = rstd[row];
    const V* xr = reinterpret_cast<const V*>(x + row * N);
    const V* gr = reinterpret_cast<const V*>(gy + row * N);
    V xk[kSlots], gk[kSlots];
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t v = lane + k * kWarpSize;
      if (v < nvec) {
        xk[k] = xr[v], gk[k] = gr[v];
      } else {  // zeros: gy = 0 adds nothing to the sums
#pragma unroll
        for (int j = 0; j < VEC; ++j) xk[k].v[j] = gk[k].v[j] = T(0);
      }
    }
    RowSums<float> s = RowSums<float>::identity();
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      if (k * kWarpSize >= nvec) break;  // the same for the whole warp
      const Vec<float, VEC> xv = to_acc(xk[k]), gv = to_acc(gk[k]), wv = to_acc(wk[k]);
      float tw[VEC], tb[VEC];  // the slot's terms of dw and db
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float xh = (xv.v[j] - mu) * rs, gxh = gv.v[j] * wv.v[j];
        s.a += gxh, s.b += gxh * xh;
        tb[j] = gv.v[j], tw[j] = gv.v[j] * xh;
      }
      if (partial) Shared::add(own, k, tw, tb);
    }
    if (!dx) continue;
    s = warp_allreduce(s, RowSumsCombine{});
    // dx = rs * (gxhat - mean(gxhat)) - (x - mu) * rs^2 * mean(gxhat * xhat), as two multiply-adds.
    const float c0 = -rs * (s.a * inv_n), c1 = -rs * rs * (s.b * inv_n);
    V* dr = reinterpret_cast<V*>(dx + row * N);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      if (k * kWarpSize >= nvec) break;
      const Vec<float, VEC> xv = to_acc(xk[k]), gv = to_acc(gk[k]), wv = to_acc(wk[k]);
      Vec<float, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = fmaf(gv.v[j] * wv.v[j], rs, fmaf(xv.v[j] - mu, c1, c0));
      if (const int64_t v = lane + k * kWarpSize; v < nvec) dr[v] = from_acc<T>(o);
    }
  }
  allow_dependent_grids();  // the column-sum kernel
  if (!partial) return;
  __syncthreads();
  Shared::write(shared_sums, kBackwardWarps, partial + blockIdx.x * 2 * N, N);
}

// Rows per tile: 4 give each thread 4 independent 16-byte loads per input in flight (2 measured
// slower).
constexpr int kTileRows = 4;

// Rows of N = nvec * VEC elements, a block of nvec threads (whole warps) per tile: thread t
// holds vector t of each row. Writes dx unless null, and with `partial` the block's sums of
// gy * xhat and gy per column into partial[blockIdx.x] = [dw | db]. w is of type P.
template <class T, class P, int VEC>
__global__ void layer_norm_backward_tile_kernel(T* dx, Acc<T>* partial, const T* gy, const T* x,
                                                const Acc<T>* mean, const Acc<T>* rstd, const P* w,
                                                int64_t rows, int64_t N) {
  using A = Acc<T>;
  constexpr int R = kTileRows;
  using Sums = Vec<RowSums<A>, R>;  // a warp's row sums of a tile
  // Double-buffered per-warp row sums: one __syncthreads per tile.
  __shared__ Sums shared[2][kWarpSize];
  const int t = threadIdx.x, lane = t % kWarpSize, warp = t / kWarpSize, warps = blockDim.x / kWarpSize;
  const int64_t nvec = N / VEC;
  const bool active = t < nvec;
  const A inv_n = A(1) / static_cast<A>(N);
  Vec<A, VEC> wa;  // the thread's columns of w (1 without w: gy * 1 is gy)
  if (w && active)
    wa = to_acc(load_columns<VEC>(w, t * VEC));
  else
#pragma unroll
    for (int j = 0; j < VEC; ++j) wa.v[j] = A(1);
  A acc_w[VEC], acc_b[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc_w[j] = acc_b[j] = A(0);
  const auto* vgy = reinterpret_cast<const Vec<T, VEC>*>(gy);
  const auto* vx = reinterpret_cast<const Vec<T, VEC>*>(x);
  int buf = 0;
  for (int64_t r0 = blockIdx.x * static_cast<int64_t>(R); r0 < rows;
       r0 += gridDim.x * static_cast<int64_t>(R)) {
    // The tile's rows; those past the end are zeros with mean and rstd 0, which add nothing.
    Vec<T, VEC> gk[R], xk[R];
    A mu[R], rs[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool in = r0 + r < rows;
      mu[r] = in ? mean[r0 + r] : A(0);
      rs[r] = in ? rstd[r0 + r] : A(0);
      if (in && active) {
        gk[r] = vgy[(r0 + r) * nvec + t];
        xk[r] = vx[(r0 + r) * nvec + t];
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) gk[r].v[j] = xk[r].v[j] = T(0);
      }
    }
    Sums s;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      s.v[r] = RowSums<A>::identity();
      if (!active) continue;
      const Vec<A, VEC> g = to_acc(gk[r]), xv = to_acc(xk[r]);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A xh = (xv.v[j] - mu[r]) * rs[r], gxh = g.v[j] * wa.v[j];
        s.v[r].a += gxh, s.v[r].b += gxh * xh;
        acc_b[j] += g.v[j], acc_w[j] += g.v[j] * xh;
      }
    }
    if (!dx) continue;
#pragma unroll
    for (int r = 0; r < R; ++r) s.v[r] = warp_allreduce(s.v[r], RowSumsCombine{});
    if (warps > 1) {
      if (lane == 0) shared[buf][warp] = s;
      __syncthreads();
      // In warp order: the result does not vary from run to run.
      s = shared[buf][0];
      for (int v = 1; v < warps; ++v) {
        const Sums more = shared[buf][v];
#pragma unroll
        for (int r = 0; r < R; ++r) s.v[r] = RowSumsCombine{}(s.v[r], more.v[r]);
      }
      buf ^= 1;
    }
    if (!active) continue;
    auto* vdx = reinterpret_cast<Vec<T, VEC>*>(dx);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r0 + r >= rows) break;
      // dx = rs * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) as two multiply-adds, with
      // xhat's rs folded into its coefficient.
      const A c0 = -rs[r] * (s.v[r].a * inv_n), c1 = -rs[r] * rs[r] * (s.v[r].b * inv_n);
      const Vec<A, VEC> g = to_acc(gk[r]), xv = to_acc(xk[r]);
      Vec<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        o.v[j] = from_acc<T>(fma(g.v[j] * wa.v[j], rs[r], fma(xv.v[j] - mu[r], c1, c0)));
      vdx[(r0 + r) * nvec + t] = o;
    }
  }
  if (!partial || !active) return;
  A* pw = partial + blockIdx.x * 2 * N;  // the block's column sums, then db's N
#pragma unroll
  for (int j = 0; j < VEC; ++j) pw[t * VEC + j] = acc_w[j], pw[N + t * VEC + j] = acc_b[j];
}

// Rows of N contiguous elements too long for a warp, a block per row (RowSplit S: in registers
// or read twice). Writes dx unless null; with `partial` (rows in registers only), sums gy * xhat
// and gy over the block's rows into partial[blockIdx.x] = [dw | db]. w is of type P.
template <class T, class P, int VEC, RowSplit S>
__global__ void layer_norm_backward_kernel(T* dx, Acc<T>* partial, const T* gy, const T* x,
                                           const Acc<T>* mean, const Acc<T>* rstd, const P* w, int64_t rows,
                                           int64_t N) {
  using A = Acc<T>;
  using R = RowRegs<T, VEC>;
  static_assert(S != RowSplit::kWarp, "rows that fit a warp take the warp or tile kernel");
  constexpr bool kInRegs = S == RowSplit::kBlock;
  constexpr int kCols = kInRegs ? kRowRegs<T> : 1;  // the thread's column sums
  __shared__ RowSums<A> shared[kWarpSize];
  const RowGroup<S> grp;
  const int64_t nvec = N / VEC;
  A acc_w[kCols], acc_b[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc_w[j] = acc_b[j] = A(0);

  for (int64_t row = grp.first; row < rows; row += grp.step) {
    const T* gr = gy + row * N;
    const T* xr = x + row * N;
    const A mu = mean[row], rs = rstd[row];
    // xhat and gxhat = gy * w of element c.
    auto xhat = [&](A xv) { return (xv - mu) * rs; };
    auto gxhat = [&](int64_t c, A gv) { return w ? gv * to_acc(w[c]) : gv; };
    RowSums<A> s = RowSums<A>::identity();
    if constexpr (kInRegs) {
      R gk, xk;
      gk.load(gr, nvec, grp.t, grp.g);
      xk.load(xr, nvec, grp.t, grp.g);
      // gxhat of slot k's elements, with w read as vectors.
      auto gxhat_slot = [&](int k, int64_t v) {
        Vec<P, VEC> wv;
        if (w) wv = load_columns<VEC>(w, v * VEC);
        Vec<A, VEC> r;
#pragma unroll
        for (int j = 0; j < VEC; ++j) r.v[j] = w ? gk.at(k, j) * to_acc(wv.v[j]) : gk.at(k, j);
        return r;
      };
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t v) {
        const Vec<A, VEC> gxh = gxhat_slot(k, v);
        A tw[VEC], tb[VEC];  // the slot's terms of dw and db
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const A xh = xhat(xk.at(k, j));
          s.a += gxh.v[j], s.b += gxh.v[j] * xh;
          tb[j] = gk.at(k, j), tw[j] = tb[j] * xh;
        }
        if (!partial) return;
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc_w[k * VEC + j] += tw[j], acc_b[k * VEC + j] += tb[j];
      });
      if (!dx) continue;
      s = grp.allreduce(s, RowSumsCombine{}, shared);
      // dx = rs * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) as two multiply-adds.
      const A c0 = -rs * (s.a / static_cast<A>(N)), c1 = -rs * (s.b / static_cast<A>(N));
      auto* pdx = reinterpret_cast<Vec<T, VEC>*>(dx + row * N);
      for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t v) {
        const Vec<A, VEC> gxh = gxhat_slot(k, v);
        Vec<T, VEC> o;
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(fma(gxh.v[j], rs, fma(xhat(xk.at(k, j)), c1, c0)));
        pdx[v] = o;
      });
    } else {
      for_each_in_rows<T, VEC>(gr, xr, N, grp.t, grp.g, [&](int64_t c, A gv, A xv) {
        const A xh = xhat(xv), gxh = gxhat(c, gv);
        s.a += gxh, s.b += gxh * xh;
      });
      s = grp.allreduce(s, RowSumsCombine{}, shared);
      const A ma = s.a / static_cast<A>(N), mb = s.b / static_cast<A>(N);
      map_rows<T, VEC>(gr, xr, dx + row * N, N, grp.t, grp.g,
                       [&](int64_t c, A gv, A xv) { return rs * (gxhat(c, gv) - ma - xhat(xv) * mb); });
    }
  }
  if constexpr (kInRegs) {
    if (!partial) return;
    A* pw = partial + blockIdx.x * 2 * N;  // the block's column sums, then db's N
    for_each_slot<R::kSlots>(nvec, grp.t, grp.g, [&](int k, int64_t v) {
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        pw[v * VEC + j] = acc_w[k * VEC + j], pw[N + v * VEC + j] = acc_b[k * VEC + j];
    });
  }
}

// dw and db for rows too long for registers: block (i, s) sums
// columns [32 i, 32 i + 32) over the s-th chunk of rows, threads (32, y) striding the rows.
template <class T>
__global__ void layer_norm_param_partial_kernel(Acc<T>* partial, const T* gy, const T* x, const Acc<T>* mean,
                                                const Acc<T>* rstd, int64_t rows, int64_t N, int64_t chunk) {
  using A = Acc<T>;
  __shared__ RowSums<A> shared[kMomentThreads];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kWarpSize) + threadIdx.x;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < rows ? begin + chunk : rows;
  RowSums<A> st = RowSums<A>::identity();  // (sum of gy * xhat, sum of gy)
  if (c < N)
    for (int64_t r = begin + threadIdx.y; r < end; r += blockDim.y) {
      const A gj = to_acc(gy[r * N + c]);
      st.a += gj * (to_acc(x[r * N + c]) - mean[r]) * rstd[r];
      st.b += gj;
    }
  shared[threadIdx.y * kWarpSize + threadIdx.x] = st;
  __syncthreads();
  if (threadIdx.y > 0 || c >= N) return;
  for (unsigned y = 1; y < blockDim.y; ++y) st = RowSumsCombine{}(st, shared[y * kWarpSize + threadIdx.x]);
  A* p = partial + blockIdx.y * 2 * N;
  p[c] = st.a, p[N + c] = st.b;
}

template <class T, class P>
void launch_layer_norm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& gy,
                                const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
  using A = Acc<T>;
  const int64_t rows = x.size(0), N = x.size(1);
  T* pdx = dx.defined() ? static_cast<T*>(dx.data_ptr()) : nullptr;
  const T* pgy = static_cast<const T*>(gy.data_ptr());
  const T* px = static_cast<const T*>(x.data_ptr());
  const auto* pm = static_cast<const A*>(mean.data_ptr());
  const auto* pr = static_cast<const A*>(rstd.data_ptr());
  const P* pw = w.defined() ? static_cast<const P*>(w.data_ptr()) : nullptr;
  const bool params = dw.defined() || db.defined();
  cudaStream_t stream = current_stream();
  Tensor partial;
  int64_t splits = 0;
  bool fused = false;
  with_vector_width<T>(N, {pdx, pgy, px, pw}, [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    // `blocks` at most, as many as run at once: each adds up its rows' column sums. `dependent`:
    // the kernel waits for the one before it (launch_dependent).
    auto launch = [&](auto kernel, bool in_regs, int64_t blocks, int threads, bool dependent = false) {
      fused = params && in_regs;
      if (!pdx && !fused) return;
      splits = std::max<int64_t>(
          1, std::min(blocks, resident_blocks(reinterpret_cast<const void*>(kernel), threads)));
      if (fused) partial = empty({splits, 2, N}, mean.options());
      A* ppartial = fused ? static_cast<A*>(partial.data_ptr()) : nullptr;
      if (dependent) {
        launch_dependent(kernel, dim3(static_cast<unsigned>(splits)), dim3(threads), stream, pdx, ppartial,
                         pgy, px, pm, pr, pw, rows, N);
      } else {
        kernel<<<static_cast<unsigned>(splits), threads, 0, stream>>>(pdx, ppartial, pgy, px, pm, pr, pw,
                                                                      rows, N);
        EMBER_CUDA_LAUNCH_CHECK();
      }
    };
    auto kernel_of = [](auto split) { return layer_norm_backward_kernel<T, P, VEC, decltype(split)::value>; };
    auto launch_split = [&](auto kernel, auto split, unsigned grid, int threads) {
      launch(kernel, decltype(split)::value != RowSplit::kBlockTwoPass, grid, threads);
    };
    if constexpr (sizeof(T) == 2) {
      if (N <= kWarpSize * kRowRegs<T>)
        launch(layer_norm_backward_warp_kernel<T, P, VEC>, true, grid_for(rows, kBackwardWarps),
               kBackwardWarps * kWarpSize, true);
      else
        launch_block_row_kernel<T>(rows, N, kernel_of, launch_split);
    } else {
      constexpr auto tile_kernel = layer_norm_backward_tile_kernel<T, P, VEC>;
      static const int tile_max = max_block_threads(tile_kernel);
      const int64_t tile_threads = std::max<int64_t>(1, ceil_div<int64_t>(N / VEC, kWarpSize)) * kWarpSize;
      if (N <= kWarpSize * kRowRegs<T> && tile_threads <= tile_max)
        launch(tile_kernel, true, ceil_div<int64_t>(rows, kTileRows), static_cast<int>(tile_threads));
      else
        launch_block_row_kernel<T>(rows, N, kernel_of, launch_split);
    }
  });
  if (!params) return;
  if (!fused) {
    // About kTargetBlocks blocks, each with at least 8 rows per thread.
    const int64_t tiles = ceil_div<int64_t>(N, kWarpSize);
    constexpr int kRowThreads = kMomentThreads / kWarpSize;
    splits = std::clamp<int64_t>(std::min(kTargetBlocks / tiles, ceil_div<int64_t>(rows, 8 * kRowThreads)), 1,
                                 65535);
    const int64_t chunk = ceil_div<int64_t>(rows, splits);
    splits = ceil_div<int64_t>(rows, chunk);
    partial = empty({splits, 2, N}, mean.options());
    layer_norm_param_partial_kernel<T>
        <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), dim3(kWarpSize, kRowThreads), 0,
           stream>>>(static_cast<A*>(partial.data_ptr()), pgy, px, pm, pr, rows, N, chunk);
    EMBER_CUDA_LAUNCH_CHECK();
  }
  launch_column_sums<A, P>({dw, db}, partial, splits, N, stream);
}

void layer_norm_backward_cuda(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& gy,
                              const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const Tensor& param = weight.defined() ? weight : dw.defined() ? dw : db;
  visit_float_dtype("layer_norm_backward", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_param_type<T>(param.defined() ? param.dtype() : x.dtype(), [&](auto ptag) {
      launch_layer_norm_backward<T, decltype(ptag)>(dx, dw, db, gy, x, mean, rstd, weight);
    });
  });
}

// out = x * scale[c] + shift[c] over x [A, C, B], VEC elements at a time (B % VEC == 0, so a
// vector never straddles two channels).
template <class T, int VEC>
__global__ void channel_affine_kernel(T* out, const T* x, const Acc<T>* scale, const Acc<T>* shift, int64_t n,
                                      int64_t C, int64_t B) {
  using V = Vec<T, VEC>;
  const bool narrow = n <= static_cast<int64_t>(UINT32_MAX);
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < n / VEC;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = v * VEC;
    const int64_t row = narrow ? static_cast<uint32_t>(i) / static_cast<uint32_t>(B) : i / B;
    const int64_t c = narrow ? static_cast<uint32_t>(row) % static_cast<uint32_t>(C) : row % C;
    const V xv = reinterpret_cast<const V*>(x)[v];
    V y;
#pragma unroll
    for (int j = 0; j < VEC; ++j) y.v[j] = from_acc<T>(to_acc(xv.v[j]) * scale[c] + shift[c]);
    reinterpret_cast<V*>(out)[v] = y;
  }
}

void channel_affine_cuda(const Tensor& out, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  const int64_t C = x.size(1), B = x.size(2), n = x.numel();
  cudaStream_t stream = current_stream();
  visit_float_dtype("channel_affine", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    T* po = static_cast<T*>(out.data_ptr());
    const T* px = static_cast<const T*>(x.data_ptr());
    const auto* ps = static_cast<const A*>(scale.data_ptr());
    const auto* ph = static_cast<const A*>(shift.data_ptr());
    constexpr int kThreads = 256;
    if (vector_width<T>(B, {po, px}) > 1) {
      constexpr int VEC = 16 / sizeof(T);
      channel_affine_kernel<T, VEC>
          <<<grid_for(n / VEC, kThreads), kThreads, 0, stream>>>(po, px, ps, ph, n, C, B);
    } else {
      channel_affine_kernel<T, 1><<<grid_for(n, kThreads), kThreads, 0, stream>>>(po, px, ps, ph, n, C, B);
    }
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<LayerNormFn> reg_layer_norm(layer_norm_stub, kCUDA, &layer_norm_cuda);
KernelRegistrar<LayerNormBackwardFn> reg_layer_norm_backward(layer_norm_backward_stub, kCUDA,
                                                             &layer_norm_backward_cuda);
KernelRegistrar<RowMomentsFn> reg_row_moments(row_moments_stub, kCUDA, &row_moments_cuda);
KernelRegistrar<ChannelAffineFn> reg_channel_affine(channel_affine_stub, kCUDA, &channel_affine_cuda);

}  // namespace
}  // namespace ember::cuda
