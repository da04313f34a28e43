// CUDA kernels of dropout_add_layer_norm. A team of threads (whole warps) takes a row at a time,
// a thread a chunk of 8 elements of it per register slot: x and residual in 16-byte loads where
// the rows allow, the keep mask from the Philox blocks of those elements (native_dropout's draw),
// the sum in registers, its mean and variance reduced over the team, the normalized row stored
// from there. A block holds several teams when rows are short (about 384 threads), so that enough
// rows are in flight. The forward also writes the mask as bits, a byte per chunk; the backward
// reads them (drawing Philox numbers costs more than the row's loads), and each thread adds its
// columns' terms of dw and db (and of dx, when the linear before asks for its bias gradient) over
// its rows in registers; the block's teams add theirs in shared memory, in a fixed order, and
// layer_norm's column-sum kernel adds up the blocks.
#include "ember/core/factories.h"
#include "ember/core/ops/dropout_add_layer_norm.h"
#include "ember/core/ops/dropout_functors.h"
#include "ember/cuda/layer_norm_util.cuh"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kChunk = 8;  // elements per thread and register slot: one byte of keep flags
static_assert(kChunk % ops::kDropoutMaskBlock == 0);
constexpr int kMaxTeam = 512, kBlockThreads = 384;
constexpr int kMaxTeamColumns = kBlockThreads / 2 * kChunk;  // of a team that shares its block

// The parameters every kernel reads, the row layout and the mask's draw.
template <class A>
struct Rows {
  int64_t rows, N;
  int team_threads;
  bool vec;  // 16-byte accesses: N % kChunk == 0 and every pointer 16-byte aligned
  bool dropout;
  double scale;  // what kept elements of x are multiplied by
  ops::DropoutMaskDraw draw;
  uint8_t* bits;  // [rows, chunks] keep bits: written by the forward when set, read by the backward

  // The team's thread t and the row this iteration gives it.
  __device__ int team() const { return static_cast<int>(threadIdx.x) / team_threads; }
  __device__ int t() const { return static_cast<int>(threadIdx.x) % team_threads; }
  __device__ int teams() const { return static_cast<int>(blockDim.x) / team_threads; }
  __device__ int64_t chunks() const { return (N + kChunk - 1) / kChunk; }
  // How many of chunk c's columns lie inside the row: kChunk but at the end of a row.
  __device__ int columns(int64_t c) const {
    return static_cast<int>(N - c * kChunk < kChunk ? N - c * kChunk : kChunk);
  }
};

// p[i, i + kChunk) as A, zeros past n; p is 16-byte aligned at i when `vec`.
template <class A, class T>
__device__ __forceinline__ void load_chunk(A (&v)[kChunk], const T* p, int64_t i, int64_t n, bool vec) {
  if (vec) {
    const Vec<A, kChunk> a = to_acc(load_columns<kChunk>(p, i));
#pragma unroll
    for (int j = 0; j < kChunk; ++j) v[j] = a.v[j];
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) v[j] = i + j < n ? to_acc(p[i + j]) : A(0);
  }
}

template <class T, class A>
__device__ __forceinline__ void store_chunk(T* p, int64_t i, int64_t n, bool vec, const A (&v)[kChunk]) {
  if (vec) {
    Vec<A, kChunk> a;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) a.v[j] = v[j];
    const Vec<T, kChunk> o = from_acc<T>(a);
    constexpr int kPer = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
#pragma unroll
    for (int q = 0; q < kChunk / kPer; ++q) {
      Vec<T, kPer> part;
#pragma unroll
      for (int j = 0; j < kPer; ++j) part.v[j] = o.v[q * kPer + j];
      reinterpret_cast<Vec<T, kPer>*>(p + i)[q] = part;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j)
      if (i + j < n) p[i + j] = from_acc<T>(v[j]);
  }
}

// Chunk c of a row, columns [8 c, 8 c + 8): s = residual + keep * x * scale (0 past the row's end)
// and the keep flags as bits, element j in bit j (drawn, and stored when the forward keeps them;
// read from the stored bits by the backward).
template <bool kReadBits, class A, class T, class R>
__device__ __forceinline__ unsigned chunk_sum(const Rows<A>& r, const T* x, const R* res, int64_t row,
                                              int64_t c, A scale, A (&s)[kChunk]) {
  const int64_t col = c * kChunk;
  A xv[kChunk];
  load_chunk(xv, x + row * r.N, col, r.N, r.vec);
  load_chunk(s, res + row * r.N, col, r.N, r.vec);
  unsigned keep = 0xffu;
  if (r.dropout && kReadBits) {
    keep = r.bits[row * r.chunks() + c];
  } else if (r.dropout) {
    const int64_t e = row * r.N + col;  // flat index of the chunk's first element
    constexpr int kBlock = ops::kDropoutMaskBlock;
    keep = 0;
    if (e % kBlock == 0) {
#pragma unroll
      for (int q = 0; q < kChunk / kBlock; ++q)
        keep |= r.draw.block_bits(static_cast<uint64_t>(e / kBlock + q)) << (q * kBlock);
    } else {  // rows of a length not a multiple of the block: the chunk straddles one block more
      const auto b = static_cast<uint64_t>(e / kBlock);
      uint64_t word = 0;
#pragma unroll
      for (int q = 0; q <= kChunk / kBlock; ++q)
        word |= static_cast<uint64_t>(r.draw.block_bits(b + q)) << (q * kBlock);
      keep = static_cast<unsigned>(word >> (e % kBlock)) & ((1u << kChunk) - 1u);
    }
    if (r.bits) r.bits[row * r.chunks() + c] = static_cast<uint8_t>(keep & ((1u << r.columns(c)) - 1u));
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) s[j] += ops::MaskedScale<A>{scale}(keep >> j & 1u ? A(1) : A(0), xv[j]);
  return keep;
}

// The sum of v over the thread's team (number `team` of the block), for every thread of the block
// (all call it together). `shared` has two kWarpSize buffers, used in turn by successive calls: a
// buffer is written again only after the __syncthreads of the call between, when every thread has
// read it. Teams of one warp reduce by shuffles alone.
template <class S, class Combine>
__device__ __forceinline__ S team_allreduce(S v, Combine combine, int team_threads, int team,
                                            S (*shared)[kWarpSize], int& parity) {
  v = warp_allreduce(v, combine);
  if (team_threads == kWarpSize) return v;
  S* buf = shared[parity];
  parity ^= 1;
  const int warps = team_threads / kWarpSize, first = team * warps;
  if (threadIdx.x % kWarpSize == 0) buf[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  S total = buf[first];
  for (int w = 1; w < warps; ++w) total = combine(total, buf[first + w]);
  return total;
}

template <class A>
struct Scalar {  // a plain value as a team_allreduce state
  A v;
  __device__ Scalar shfl_xor(int offset) const { return {cuda::shfl_xor(v, offset)}; }
};
struct ScalarSum {
  template <class A>
  __device__ Scalar<A> operator()(Scalar<A> a, Scalar<A> b) const {
    return {a.v + b.v};
  }
};

// kMinBlocks 2 for blocks of at most kBlockThreads, 3 for the forward of rows of one slot:
// registers for that many blocks per SM, which keep more loads in flight. The forward of BERT's
// rows took 5% less time at 3 (H100; 52 bytes spilled); its two-slot form spills 268 bytes, and the
// backward's partial sums 760 (1.5x slower).
template <class T, class R, class P, int kSlots, int kMinBlocks>
__global__ void __launch_bounds__(kMinBlocks == 1 ? kMaxTeam : kBlockThreads, kMinBlocks)
    forward_kernel(T* out, Acc<T>* mean, Acc<T>* rstd, const T* x, const R* res, const P* w, const P* b,
                   Rows<Acc<T>> r, double eps) {
  using A = Acc<T>;
  __shared__ Scalar<A> shared[2][kWarpSize];
  r.draw.rng = r.draw.rng.resolved();
  const A scale = static_cast<A>(r.scale);
  const int t = r.t(), team = r.team(), teams = r.teams();
  const int64_t chunks = r.chunks();
  int parity = 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * teams; base < r.rows;
       base += static_cast<int64_t>(gridDim.x) * teams) {
    const int64_t row = base + team;
    const bool live = row < r.rows;
    A s[kSlots][kChunk];
    A sum = A(0);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
      if (live && c < chunks) {
        chunk_sum<false>(r, x, res, row, c, scale, s[k]);
#pragma unroll
        for (int j = 0; j < kChunk; ++j) sum += s[k][j];
      }
    }
    const A mu = team_allreduce(Scalar<A>{sum}, ScalarSum{}, r.team_threads, team, shared, parity).v /
                 static_cast<A>(r.N);
    A sq = A(0);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
      if (!live || c >= chunks) continue;
      const int n = r.columns(c);
#pragma unroll
      for (int j = 0; j < kChunk; ++j)
        if (j < n) sq += (s[k][j] - mu) * (s[k][j] - mu);
    }
    const A m2 = team_allreduce(Scalar<A>{sq}, ScalarSum{}, r.team_threads, team, shared, parity).v;
    const A rs = A(1) / sqrt(m2 / static_cast<A>(r.N) + static_cast<A>(eps));
    if (!live) continue;
    if (t == 0) mean[row] = mu, rstd[row] = rs;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
      if (c >= chunks) continue;
      A wv[kChunk], bv[kChunk], y[kChunk];
      if (w) load_chunk(wv, w, c * kChunk, r.N, r.vec);
      if (b) load_chunk(bv, b, c * kChunk, r.N, r.vec);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        y[j] = (s[k][j] - mu) * rs;
        if (w) y[j] *= wv[j];
        if (b) y[j] += bv[j];
      }
      store_chunk(out + row * r.N, c * kChunk, r.N, r.vec, y);
    }
  }
}

// kParts 2: partial gets [dw | db] per block; 3: [dw | db | dx].
template <class T, class R, class P, int kSlots, int kMinBlocks, int kParts>  // as forward_kernel's
__global__ void __launch_bounds__(kMinBlocks == 1 ? kMaxTeam : kBlockThreads, kMinBlocks)
    backward_kernel(T* dx, R* dres, Acc<T>* partial, const T* gy, const T* x, const R* res,
                    const Acc<T>* mean, const Acc<T>* rstd, const P* w, Rows<Acc<T>> r) {
  using A = Acc<T>;
  __shared__ RowSums<A> shared[2][kWarpSize];
  __shared__ A team_sums[kParts][kMaxTeamColumns];
  const A scale = static_cast<A>(r.scale);
  const A inv_n = A(1) / static_cast<A>(r.N);
  const int t = r.t(), team = r.team(), teams = r.teams();
  const int64_t chunks = r.chunks();
  A part[kParts][kSlots][kChunk];  // this thread's columns of dw, db (and dx)
#pragma unroll
  for (int q = 0; q < kParts; ++q)
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
#pragma unroll
      for (int j = 0; j < kChunk; ++j) part[q][k][j] = A(0);
  wait_for_prior_grids();  // launched by launch_dependent
  int parity = 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * teams; base < r.rows;
       base += static_cast<int64_t>(gridDim.x) * teams) {
    const int64_t row = base + team;
    const bool live = row < r.rows;
    A xhat[kSlots][kChunk], gxhat[kSlots][kChunk];
    unsigned kept[kSlots];  // the keep flags as bits: 8 registers fewer a slot than bools
    RowSums<A> sums = RowSums<A>::identity();
    const A mu = live ? mean[row] : A(0), rs = live ? rstd[row] : A(0);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
      if (!live || c >= chunks) continue;
      A g[kChunk], wv[kChunk];
      kept[k] = chunk_sum<true>(r, x, res, row, c, scale, xhat[k]);
      load_chunk(g, gy + row * r.N, c * kChunk, r.N, r.vec);
      if (w) load_chunk(wv, w, c * kChunk, r.N, r.vec);
      const int n = r.columns(c);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        xhat[k][j] = j < n ? (xhat[k][j] - mu) * rs : A(0);
        gxhat[k][j] = w ? g[j] * wv[j] : g[j];
        sums.a += gxhat[k][j], sums.b += gxhat[k][j] * xhat[k][j];
        part[0][k][j] += g[j] * xhat[k][j], part[1][k][j] += g[j];
      }
    }
    sums = team_allreduce(sums, RowSumsCombine{}, r.team_threads, team, shared, parity);
    if (!live || (!dx && !dres)) continue;
    // ds = rs * (gxhat - mean(gxhat)) - xhat * rs * mean(gxhat * xhat)
    const A c0 = -rs * (sums.a * inv_n), c1 = -rs * (sums.b * inv_n);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
      if (c >= chunks) continue;
      A ds[kChunk], d[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        ds[j] = gxhat[k][j] * rs + (c0 + xhat[k][j] * c1);
        d[j] = ops::MaskedScale<A>{scale}(kept[k] >> j & 1u ? A(1) : A(0), ds[j]);
        if constexpr (kParts == 3) part[2][k][j] += to_acc(from_acc<T>(d[j]));  // dx as stored
      }
      if (dres) store_chunk(dres + row * r.N, c * kChunk, r.N, r.vec, ds);
      if (dx) store_chunk(dx + row * r.N, c * kChunk, r.N, r.vec, d);
    }
  }
  allow_dependent_grids();  // the column-sum kernel
  if (!partial) return;
  // Team by team into shared memory (one team per block when rows are long: straight out).
  A* out = partial + static_cast<int64_t>(blockIdx.x) * kParts * r.N;
  for (int turn = 0; turn < teams; ++turn) {
    if (turn > 0) __syncthreads();
    if (team != turn) continue;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t c = t + static_cast<int64_t>(k) * r.team_threads;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const int64_t col = c * kChunk + j;
        if (c >= chunks || col >= r.N) continue;
#pragma unroll
        for (int q = 0; q < kParts; ++q) {
          if (teams == 1)
            out[q * r.N + col] = part[q][k][j];
          else
            team_sums[q][col] = (turn > 0 ? team_sums[q][col] : A(0)) + part[q][k][j];
        }
      }
    }
  }
  if (teams == 1) return;
  __syncthreads();
  for (int64_t col = threadIdx.x; col < r.N; col += blockDim.x)
#pragma unroll
    for (int q = 0; q < kParts; ++q) out[q * r.N + col] = team_sums[q][col];
}

// The team and block shape for rows of N: kSlots chunks per thread, and teams of whole warps.
struct Shape {
  int slots, team_threads, teams;
};

Shape shape_for(int64_t N) {
  const int64_t chunks = ceil_div<int64_t>(N, kChunk);
  const int slots = chunks <= kMaxTeam ? 1 : 2;
  const int team =
      static_cast<int>(ceil_div<int64_t>(ceil_div<int64_t>(chunks, slots), kWarpSize) * kWarpSize);
  return {slots, team, team <= kBlockThreads / 2 ? kBlockThreads / team : 1};
}

template <class A>
Rows<A> rows_of(const Tensor& x, const Shape& sh, std::initializer_list<const void*> ptrs, bool dropout,
                double p, PhiloxState rng, const Tensor& bits) {
  bool vec = x.size(1) % kChunk == 0;
  for (const void* q : ptrs) vec = vec && reinterpret_cast<uintptr_t>(q) % 16 == 0;
  uint8_t* bit_ptr = bits.defined() ? static_cast<uint8_t*>(bits.data_ptr()) : nullptr;
  return {x.size(0),
          x.size(1),
          sh.team_threads,
          vec,
          dropout,
          dropout ? ops::dropout_scale(p) : 1.0,
          ops::DropoutMaskDraw(rng, p),
          bit_ptr};
}

// f(T{}, R{}, P{}) for x's dtype T, residual's R and the parameters' P.
template <class F>
void visit_types(const char* op, const Tensor& x, const Tensor& residual, ScalarType param, F&& f) {
  visit_float_dtype(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_param_type<T>(param, [&](auto ptag) {
      if (residual.dtype() == x.dtype()) {
        f(tag, tag, ptag);
      } else {
        constexpr bool kReduced = !std::is_same_v<T, Acc<T>>;
        EMBER_CHECK(residual.dtype() == kFloat32 && kReduced, op, ": a residual of dtype ", residual.dtype(),
                    " with an input of dtype ", x.dtype());
        if constexpr (kReduced) f(tag, float{}, ptag);
      }
    });
  });
}

template <class K>
void with_slots(int slots, K&& k) {
  if (slots == 1)
    k(std::integral_constant<int, 1>{});
  else
    k(std::integral_constant<int, 2>{});
}

template <class P>
const P* param_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const P*>(t.data_ptr()) : nullptr;
}

void forward_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& bits,
                  const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                  bool dropout, double p, PhiloxState rng, double eps) {
  const Tensor& param = weight.defined() ? weight : bias;
  const Shape sh = shape_for(x.size(1));
  visit_types("dropout_add_layer_norm", x, residual, param.defined() ? param.dtype() : x.dtype(),
              [&](auto tt, auto rt, auto pt) {
                using T = decltype(tt);
                using R = decltype(rt);
                using P = decltype(pt);
                using A = Acc<T>;
                const P *pw = param_ptr<P>(weight), *pb = param_ptr<P>(bias);
                const Rows<A> r = rows_of<A>(
                    x, sh, {out.data_ptr(), x.data_ptr(), residual.data_ptr(), pw, pb}, dropout, p, rng,
                    bits);
                const int threads = sh.teams * sh.team_threads;
                with_slots(sh.slots, [&](auto slots) {
                  constexpr int kSlots = decltype(slots)::value;
                  constexpr int kMinBlocks = kSlots == 1 ? 3 : 2;
                  const auto kernel = threads <= kBlockThreads ? forward_kernel<T, R, P, kSlots, kMinBlocks>
                                                               : forward_kernel<T, R, P, kSlots, 1>;
                  kernel<<<grid_for(r.rows, sh.teams), threads, 0, current_stream()>>>(
                      static_cast<T*>(out.data_ptr()), static_cast<A*>(mean.data_ptr()),
                      static_cast<A*>(rstd.data_ptr()), static_cast<const T*>(x.data_ptr()),
                      static_cast<const R*>(residual.data_ptr()), pw, pb, r, eps);
                  EMBER_CUDA_LAUNCH_CHECK();
                });
              });
}

void backward_cuda(const Tensor& dx, const Tensor& dres, const Tensor& dw, const Tensor& db,
                   const Tensor& dx_sums, const Tensor& gy, const Tensor& x, const Tensor& residual,
                   const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bits,
                   double p) {
  const Tensor& param = weight.defined() ? weight : dw.defined() ? dw : db.defined() ? db : dx_sums;
  const Shape sh = shape_for(x.size(1));
  visit_types("dropout_add_layer_norm_backward", x, residual, param.defined() ? param.dtype() : x.dtype(),
              [&](auto tt, auto rt, auto pt) {
                using T = decltype(tt);
                using R = decltype(rt);
                using P = decltype(pt);
                using A = Acc<T>;
                const P* pw = param_ptr<P>(weight);
                T* pdx = dx.defined() ? static_cast<T*>(dx.data_ptr()) : nullptr;
                R* pdres = dres.defined() ? static_cast<R*>(dres.data_ptr()) : nullptr;
                const Rows<A> r =
                    rows_of<A>(x, sh, {pdx, pdres, gy.data_ptr(), x.data_ptr(), residual.data_ptr(), pw},
                               bits.defined(), p, PhiloxState{}, bits);
                const bool sums = dw.defined() || db.defined() || dx_sums.defined();
                cudaStream_t stream = current_stream();
                const int threads = sh.teams * sh.team_threads;
                // kParts 3: the input gradient's row sums too.
                auto launch = [&](auto kernel, auto parts) {
                  constexpr int kParts = decltype(parts)::value;
                  const int64_t splits = std::max<int64_t>(
                      1, std::min<int64_t>(ceil_div<int64_t>(r.rows, sh.teams),
                                           resident_blocks(reinterpret_cast<const void*>(kernel), threads)));
                  Tensor partial = sums ? empty({splits, kParts, r.N}, mean.options()) : Tensor();
                  kernel<<<static_cast<unsigned>(splits), threads, 0, stream>>>(
                      pdx, pdres, sums ? static_cast<A*>(partial.data_ptr()) : nullptr,
                      static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(x.data_ptr()),
                      static_cast<const R*>(residual.data_ptr()), static_cast<const A*>(mean.data_ptr()),
                      static_cast<const A*>(rstd.data_ptr()), pw, r);
                  EMBER_CUDA_LAUNCH_CHECK();
                  if (!sums) return;
                  if constexpr (kParts == 3)
                    launch_column_sums<A, P>({dw, db, dx_sums}, partial, splits, r.N, stream);
                  else
                    launch_column_sums<A, P>({dw, db}, partial, splits, r.N, stream);
                };
                with_slots(sh.slots, [&](auto slots) {
                  constexpr int kSlots = decltype(slots)::value;
                  auto with_parts = [&](auto parts) {
                    constexpr int kParts = decltype(parts)::value;
                    launch(threads <= kBlockThreads ? backward_kernel<T, R, P, kSlots, 2, kParts>
                                                    : backward_kernel<T, R, P, kSlots, 1, kParts>,
                           parts);
                  };
                  if (dx_sums.defined())
                    with_parts(std::integral_constant<int, 3>{});
                  else
                    with_parts(std::integral_constant<int, 2>{});
                });
              });
}

KernelRegistrar<DropoutAddLayerNormFn> reg_forward(dropout_add_layer_norm_stub, kCUDA, &forward_cuda);
KernelRegistrar<DropoutAddLayerNormBackwardFn> reg_backward(dropout_add_layer_norm_backward_stub, kCUDA,
                                                            &backward_cuda);

}  // namespace
}  // namespace ember::cuda
