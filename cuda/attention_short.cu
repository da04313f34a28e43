// Fused attention for up to 128 queries and keys (attention_short.h). A block of 8 warps takes one
// (batch, head): Q, K, V (and in the backward dO) come into shared memory once, rows padded
// against bank conflicts, and every product runs on mma.sync m16n8k16 with float accumulators,
// its operands loaded by ldmatrix. Dropout's keep masks are drawn into shared memory while the
// block's loads are in flight, so that Philox's integer work overlaps them.
//
// Forward: warp w owns queries 16 w .. 16 w + 15; its scores S = Q K^T stay in registers, the
// softmax runs on them (exp2, row max and sum across the four lanes that share a row), the
// unnormalized weights, packed as the A operand of P V (FlashAttention-2's layout trick), are
// masked by a bitwise and, and the output is divided by the row sum at the end.
//
// Backward (with D_i = dO_i . O_i): warp w recomputes P for its queries from the kept
// log-sum-exp and writes the dropped weights P_d to shared memory while V and dO still arrive,
// then computes dP_d = dO V^T, dS = P (dP - D) for dP the dropout's backward of dP_d, and
// dQ = dS K scale, all in registers. Then the warps switch to keys: warp w sums
// dV = P_d^T dO over every query for keys 16 w .., and after dS replaces P_d in shared memory,
// dK = dS^T Q scale. Every gradient is written once, complete.
#include "ember/cuda/attention_short.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "ember/core/factories.h"
#include "ember/cuda/attention_flash.h"
#include "ember/cuda/attention_layout.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr int kLen = static_cast<int>(kShortAttentionMaxLen);  // queries and keys a block holds
constexpr int kD = static_cast<int>(kShortAttentionHeadDim);
constexpr int kWarps = kLen / 16, kThreads = kWarps * kWarpSize;  // a warp per 16 rows
constexpr int kKeyTiles = kLen / 8;                               // a row's score tiles of 8 keys
constexpr int kDimTiles = kD / 8;
constexpr int kLd = kD + 8;     // row stride of a [rows, D] tile: 16 bytes of padding shift the banks
constexpr int kLdx = kLen + 8;  // row stride of the backward's [queries, keys] tile
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// Row i of a [B, H, rows, D] operand; its last dim has unit stride.
template <class T>
struct Rows {
  T* data;
  int64_t sb, sh, sl;
  __device__ T* row(int64_t b, int64_t h, int64_t i) const { return data + b * sb + h * sh + i * sl; }
};

template <class T>
Rows<T> rows_of(const Tensor& t) {
  return {static_cast<T*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

// c += a b for a 16x16 A (row-major fragments a) and a 16x8 B (fragments b0, b1).
template <class T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // applies() sends older GPUs elsewhere
#else
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 16-bit matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// Two floats as a pair of T, the first in the low half (the lower column of a fragment).
template <class T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&h);
  }
  return r;
}

// A bf16 is a float's high half: shift and mask, where __bfloat1622float2 goes through PRMTs and, at
// the backward's 128 registers, spills.
template <class T>
__device__ __forceinline__ float2 unpack(uint32_t x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
  else
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
}

// Rows [0, n) of operand (b, h) into a [kLen, kLd] tile by cp.async, zeros past row n.
template <class T>
__device__ void load_rows(T* tile, const Rows<const T>& src, int64_t b, int64_t h, int n) {
  constexpr int kPerRow = kD / 8;  // 16-byte vectors
#pragma unroll
  for (int it = 0; it < kLen * kPerRow / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / kPerRow, c = i % kPerRow * 8;
    const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(tile + r * kLd + c));
    const T* from = r < n ? src.row(b, h, r) + c : src.data;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(from), "r"(r < n ? 16 : 0));
#endif
  }
}

// cp.async groups: commit closes one; the waits return when all, or all but the last, are done.
__device__ __forceinline__ void commit_loads() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_loads() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_loads_but_last() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;" ::: "memory");
#endif
}

// s[n] = rows [r0, r0 + 16) of `a` times rows 8n .. 8n + 7 of `b` (both [kLen, kLd] tiles, so
// S = Q K^T and dP = dO V^T), for the tiles of keys below S; the others are left at 0.
template <class T>
__device__ void row_products(float (&s)[kKeyTiles][4], const T* a, const T* b, int r0, int S, int lane) {
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t af[4];
    ldmatrix_x4<false>(af, a + (r0 + lane % 16) * kLd + kk * 16 + lane / 16 * 8);
#pragma unroll
    for (int np = 0; np < kKeyTiles / 2; ++np) {
      if (np * 16 >= S) break;
      uint32_t bf[4];
      ldmatrix_x4<false>(bf, b + (np * 16 + lane % 8 + lane / 16 * 8) * kLd + kk * 16 + (lane / 8) % 2 * 8);
      mma<T>(s[2 * np], af, bf[0], bf[1]);
      mma<T>(s[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// A fragments of a row block's weights w[n] (key tiles 2 kt and 2 kt + 1 make fragment kt).
template <class T>
__device__ void to_fragments(uint32_t (&a)[kKeyTiles / 2][4], const float (&w)[kKeyTiles][4]) {
#pragma unroll
  for (int kt = 0; kt < kKeyTiles / 2; ++kt) {
    a[kt][0] = pack<T>(w[2 * kt][0], w[2 * kt][1]);
    a[kt][1] = pack<T>(w[2 * kt][2], w[2 * kt][3]);
    a[kt][2] = pack<T>(w[2 * kt + 1][0], w[2 * kt + 1][1]);
    a[kt][3] = pack<T>(w[2 * kt + 1][2], w[2 * kt + 1][3]);
  }
}

// o[nd] += w v: w a row block's weights over the keys (fragments), v a [kLen keys, kLd] tile
// (O = P V, dQ = dS K).
template <class T>
__device__ void weights_times(float (&o)[kDimTiles][4], const uint32_t (&w)[kKeyTiles / 2][4], const T* v,
                              int S, int lane) {
#pragma unroll
  for (int kt = 0; kt < kKeyTiles / 2; ++kt) {
    if (kt * 16 >= S) break;
#pragma unroll
    for (int np = 0; np < kDimTiles / 2; ++np) {
      uint32_t bf[4];
      ldmatrix_x4<true>(bf, v + (kt * 16 + lane % 8 + (lane / 8) % 2 * 8) * kLd + np * 16 + lane / 16 * 8);
      mma<T>(o[2 * np], w[kt], bf[0], bf[1]);
      mma<T>(o[2 * np + 1], w[kt], bf[2], bf[3]);
    }
  }
}

// acc[nd] += x^T y for keys [m0, m0 + 16): x a [queries, kLdx] tile of weights, y a [queries, kLd]
// tile, summed over queries below L (dV = P_d^T dO, dK = dS^T Q).
template <class T>
__device__ void transposed_times(float (&acc)[kDimTiles][4], const T* x, const T* y, int m0, int L,
                                 int lane) {
#pragma unroll
  for (int qt = 0; qt < kLen / 16; ++qt) {
    if (qt * 16 >= L) break;
    uint32_t af[4];
    ldmatrix_x4<true>(af, x + (qt * 16 + lane % 8 + lane / 16 * 8) * kLdx + m0 + (lane / 8) % 2 * 8);
#pragma unroll
    for (int np = 0; np < kDimTiles / 2; ++np) {
      uint32_t bf[4];
      ldmatrix_x4<true>(bf, y + (qt * 16 + lane % 8 + (lane / 8) % 2 * 8) * kLd + np * 16 + lane / 16 * 8);
      mma<T>(acc[2 * np], af, bf[0], bf[1]);
      mma<T>(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// The keep mask of a pair of weights from one 32-bit Philox word: 0xffff over each 16-bit half
// whose draw is below the threshold, for a pair of T packed the same way (low half first).
__device__ __forceinline__ uint32_t keep_pair(uint32_t x, uint32_t keep_below) {
  return ((x & 0xffffu) < keep_below ? 0xffffu : 0u) | ((x >> 16) < keep_below ? 0xffff0000u : 0u);
}

// Calls f(n, r, mask) with the keep mask (keep_pair) of this lane's pair of weights in score tile n
// of row i0 + 8 r, drawing each Philox block of short_attention_keeps once: word jj of the block for
// (row, chunk c4, lane t) covers keys 32 c4 + 8 jj + 2 t and the next.
template <class F>
__device__ void for_each_keep_pair(const ops::DropoutMaskDraw& draw, int64_t bh, int64_t L, int64_t i0, int t,
                                   int S, F&& f) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c4 = 0; c4 < kKeyTiles / 4; ++c4) {
      if (c4 * 32 >= S) break;
      const uint64_t block = static_cast<uint64_t>(16 * (bh * L + i0 + 8 * r) + 4 * c4 + t);
      const Philox4x32 x = philox_block(draw.rng.seed, draw.rng.offset, block);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) f(4 * c4 + jj, r, keep_pair(x.v[jj], draw.keep_below));
    }
}

// The pair of T at keys 8 n + 2 t, + 1 of `row` in a [queries, kLdx] tile, as one word.
template <class T>
__device__ __forceinline__ uint32_t& pair_at(T* x, int row, int n, int t) {
  return *reinterpret_cast<uint32_t*>(x + row * kLdx + 8 * n + 2 * t);
}
template <class T>
__device__ __forceinline__ uint32_t pair_at(const T* x, int row, int n, int t) {
  return *reinterpret_cast<const uint32_t*>(x + row * kLdx + 8 * n + 2 * t);
}

// A row's reduction over this lane's 32 scores (elements 2 r, 2 r + 1 of each tile), as a tree.
template <class Op>
__device__ __forceinline__ float row_reduce(const float (&s)[kKeyTiles][4], int r, Op op) {
  float v[kKeyTiles];
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) v[n] = op(s[n][2 * r], s[n][2 * r + 1]);
#pragma unroll
  for (int w = kKeyTiles / 2; w > 0; w /= 2)
#pragma unroll
    for (int n = 0; n < kKeyTiles / 2; ++n)
      if (n < w) v[n] = op(v[n], v[n + w]);
  return v[0];
}

struct Common {
  int H, L, S;
  float scale, scale_log2;  // the scores' scale (positive), and times log2(e)
  bool causal, dropout;
  float drop_scale;  // 1 / (1 - p)
  ops::DropoutMaskDraw draw;
};

// Sets to -inf the scores of this lane that no query may attend: keys past S, causal keys past the
// query, and rows past `rows`. Only where some can be (a uniform branch: BERT's full blocks skip it).
__device__ void mask_scores(float (&s)[kKeyTiles][4], const Common& c, int r0, int rows, int lane) {
  if (c.S == kLen && rows == kLen && !c.causal) return;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int i = r0 + g + 8 * (x / 2), j = 8 * n + 2 * t + x % 2;
      if (j >= c.S || (c.causal && j > i) || i >= rows) s[n][x] = -INFINITY;
    }
}

// This lane's keep masks (keep_pair) for rows r0 + g, + 8 into its own pairs of a [queries, kLdx]
// tile: each lane later reads back only what it wrote.
template <class T>
__device__ void write_keep_masks(T* x, const ops::DropoutMaskDraw& draw, int64_t bh, const Common& c, int r0,
                                 int lane) {
  const int g = lane / 4, t = lane % 4;
  for_each_keep_pair(draw, bh, c.L, r0 + g, t, c.S,
                     [&](int n, int r, uint32_t keep) { pair_at(x, r0 + g + 8 * r, n, t) = keep; });
}

template <class T>
struct ForwardArgs {
  Rows<const T> q, k, v;
  Rows<T> out;
  float* lse;        // [B H L], or null
  int64_t* rng_out;  // the draw's resolved seed and offset for the backward, or null
  Common c;
};

// Q, K and V of batch-and-head entry bh into a buffer of three tiles, by cp.async.
template <class T>
__device__ void load_qkv(T* buf, const ForwardArgs<T>& a, int64_t bh) {
  const int64_t b = bh / a.c.H, h = bh % a.c.H;
  load_rows<T>(buf, a.q, b, h, a.c.L);
  load_rows<T>(buf + kLen * kLd, a.k, b, h, a.c.S);
  load_rows<T>(buf + 2 * kLen * kLd, a.v, b, h, a.c.S);
}

// One entry's output rows [r0, r0 + 16) and their log-sum-exp, from Q, K, V tiles in shared memory.
template <class T>
__device__ void forward_rows(const ForwardArgs<T>& a, int64_t bh, T* sq, const T* sk, const T* sv,
                             const T* sm, int r0, int lane) {
  const Common& c = a.c;
  const int64_t b = bh / c.H, h = bh % c.H;
  const int g = lane / 4, t = lane % 4;
  float s[kKeyTiles][4];
  row_products<T>(s, sq, sk, r0, c.S, lane);
  mask_scores(s, c, r0, kLen, lane);  // every row keeps key 0
  float m[2] = {row_reduce(s, 0, MaxOp()), row_reduce(s, 1, MaxOp())}, l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
    m[r] *= c.scale_log2;
  }
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) s[n][x] = exp2f(fmaf(s[n][x], c.scale_log2, -m[x / 2]));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = row_reduce(s, r, SumOp());
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  // The weights as A fragments (pair n % 2 * 2 + r of fragment n / 2 is tile n's of row r), the
  // dropped ones zeroed; 1 / (1 - p) joins 1 / l at the end.
  uint32_t p[kKeyTiles / 2][4];
  to_fragments<T>(p, s);
  if (c.dropout)
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (8 * n < c.S) p[n / 2][n % 2 * 2 + r] &= pair_at(sm, r0 + g + 8 * r, n, t);
  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  weights_times<T>(o, p, sv, c.S, lane);

  // The output through this warp's own rows of the Q tile, for 16-byte stores.
  const float inv[2] = {c.drop_scale / l[0], c.drop_scale / l[1]};
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(sq + (r0 + g + 8 * r) * kLd + 8 * n + 2 * t) =
          pack<T>(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
  __syncwarp();
#pragma unroll
  for (int it = 0; it < 16 * kDimTiles / kWarpSize; ++it) {
    const int e = lane + it * kWarpSize, row = r0 + e / kDimTiles, col = e % kDimTiles * 8;
    if (row < c.L)
      *reinterpret_cast<uint4*>(a.out.row(b, h, row) + col) =
          *reinterpret_cast<const uint4*>(sq + row * kLd + col);
  }
  if (a.lse && t == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = r0 + g + 8 * r;
      if (i < c.L) a.lse[bh * c.L + i] = (m[r] + log2f(l[r])) * kLn2;  // natural log
    }
}

// Dropout's masks are drawn while the loads are in flight, into a [queries, kLdx] tile that the
// weights are masked from later: Philox's integer work then hides behind the loads' latency.
template <class T>
__global__ void __launch_bounds__(kThreads, 2) short_forward_kernel(const ForwardArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sm = sq + 3 * kLen * kLd;  // keep masks
  const int64_t bh = blockIdx.x;
  load_qkv<T>(sq, a, bh);
  commit_loads();
  ops::DropoutMaskDraw draw = a.c.draw;
  draw.rng = draw.rng.resolved();
  if (a.rng_out && bh == 0 && threadIdx.x == 0)
    a.rng_out[0] = static_cast<int64_t>(draw.rng.seed), a.rng_out[1] = static_cast<int64_t>(draw.rng.offset);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, r0 = warp * 16;
  if (a.c.dropout && r0 < a.c.L) write_keep_masks(sm, draw, bh, a.c, r0, lane);
  wait_loads();
  __syncthreads();
  if (r0 < a.c.L) forward_rows<T>(a, bh, sq, sq + kLen * kLd, sq + 2 * kLen * kLd, sm, r0, lane);
}

template <class T>
struct BackwardArgs {
  Rows<const T> q, k, v, out, dout;
  Rows<T> dq, dk, dv;
  const float* lse;
  const int64_t* rng;  // the forward's resolved seed and offset, with dropout
  Common c;
};

// Stores a [16, D] block of float accumulators, rows r0 + g (+ 8) below n, times `scale`.
template <class T>
__device__ void store_rows(const Rows<T>& dst, int64_t b, int64_t h, int r0, int n,
                           const float (&acc)[kDimTiles][4], float scale, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = r0 + g + 8 * r;
    if (i >= n) continue;
    T* row = dst.row(b, h, i);
#pragma unroll
    for (int nd = 0; nd < kDimTiles; ++nd)
      *reinterpret_cast<uint32_t*>(row + 8 * nd + 2 * t) =
          pack<T>(acc[nd][2 * r] * scale, acc[nd][2 * r + 1] * scale);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) short_backward_kernel(const BackwardArgs<T> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sk = sq + kLen * kLd;
  T* sv = sk + kLen * kLd;
  T* sdo = sv + kLen * kLd;
  T* sx = sdo + kLen * kLd;  // P_d, then dS: [queries, kLdx]
  float* sdelta = reinterpret_cast<float*>(sx + kLen * kLdx);
  float* slse = sdelta + kLen;
  const Common& c = a.c;
  const int64_t bh = blockIdx.x, b = bh / c.H, h = bh % c.H;
  // Two groups of loads: the scores' operands first, so that P is computed while V and dO arrive.
  load_rows<T>(sq, a.q, b, h, c.L);
  load_rows<T>(sk, a.k, b, h, c.S);
  commit_loads();
  load_rows<T>(sv, a.v, b, h, c.S);
  load_rows<T>(sdo, a.dout, b, h, c.L);
  commit_loads();
  {
    // D_i = dO_i . O_i and the log-sum-exp in log2 units: a row per pair of threads.
    const int row = threadIdx.x / 2, half = threadIdx.x % 2;
    float d = 0.f;
    if (row < c.L) {
      const T* o = a.out.row(b, h, row) + half * (kD / 2);
      const T* go = a.dout.row(b, h, row) + half * (kD / 2);
#pragma unroll
      for (int e = 0; e < kD / 2; e += 8) {
        const uint4 ov = *reinterpret_cast<const uint4*>(o + e), gv = *reinterpret_cast<const uint4*>(go + e);
        const uint32_t* ow = &ov.x;
        const uint32_t* gw = &gv.x;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const float2 of = unpack<T>(ow[w]), gf = unpack<T>(gw[w]);
          d += of.x * gf.x + of.y * gf.y;
        }
      }
    }
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (half == 0) sdelta[row] = d, slse[row] = row < c.L ? a.lse[bh * c.L + row] * kLog2e : 0.f;
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, g = lane / 4, t = lane % 4;
  const int r0 = warp * 16;  // this warp's queries, then its keys
  if (c.dropout && r0 < c.L) {
    ops::DropoutMaskDraw draw = c.draw;
    draw.rng = PhiloxState{static_cast<uint64_t>(a.rng[0]), static_cast<uint64_t>(a.rng[1])};
    write_keep_masks(sx, draw, bh, c, r0, lane);  // while the loads are in flight
  }
  wait_loads_but_last();
  __syncthreads();

  float s[kKeyTiles][4];
  uint32_t p[kKeyTiles][2];  // P rounded to T (pairs: tile n's of row r)
  if (r0 < c.L) {
    row_products<T>(s, sq, sk, r0, c.S, lane);
    mask_scores(s, c, r0, c.L, lane);
    const float lse[2] = {slse[r0 + g], slse[r0 + g + 8]};
    // P, and P_d without its 1 / (1 - p) (which joins dV's store) into the [queries, keys] tile.
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        p[n][r] = pack<T>(exp2f(fmaf(s[n][2 * r], c.scale_log2, -lse[r])),
                          exp2f(fmaf(s[n][2 * r + 1], c.scale_log2, -lse[r])));
        uint32_t& pd = pair_at(sx, r0 + g + 8 * r, n, t);
        pd = c.dropout && 8 * n < c.S ? p[n][r] & pd : p[n][r];
      }
  }
  wait_loads();
  __syncthreads();  // V and dO are in

  uint32_t ds[kKeyTiles / 2][4];  // dS of this warp's queries, as A fragments
  if (r0 < c.L) {
    row_products<T>(s, sdo, sv, r0, c.S, lane);  // dP_d = dO V^T
    // dS = P (dP_d keep / (1 - p) - D) = (P_d dP_d - P D (1 - p)) / (1 - p), with P_d read back from
    // this lane's writes; the last 1 / (1 - p) joins the stores of dQ and dK.
    const float delta[2] = {sdelta[r0 + g] / c.drop_scale, sdelta[r0 + g + 8] / c.drop_scale};
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float2 pf = unpack<T>(p[n][r]);
        const float2 kf = unpack<T>(pair_at(sx, r0 + g + 8 * r, n, t));
        s[n][2 * r] = fmaf(kf.x, s[n][2 * r], -pf.x * delta[r]);
        s[n][2 * r + 1] = fmaf(kf.y, s[n][2 * r + 1], -pf.y * delta[r]);
      }
    to_fragments<T>(ds, s);
    float dq[kDimTiles][4];
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
    weights_times<T>(dq, ds, sk, c.S, lane);
    store_rows<T>(a.dq, b, h, r0, c.L, dq, c.scale * c.drop_scale, lane);
  }
  __syncthreads();  // P_d is whole

  float acc[kDimTiles][4];
  if (r0 < c.S) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    transposed_times<T>(acc, sx, sdo, r0, c.L, lane);
    store_rows<T>(a.dv, b, h, r0, c.S, acc, c.drop_scale, lane);
  }
  __syncthreads();  // every warp is done with P_d
  if (r0 < c.L)
#pragma unroll
    for (int kt = 0; kt < kKeyTiles / 2; ++kt)
#pragma unroll
      for (int f = 0; f < 4; ++f)  // fragment f: row g + 8 (f % 2), keys 16 kt + 8 (f / 2) + 2 t
        *reinterpret_cast<uint32_t*>(sx + (r0 + g + 8 * (f % 2)) * kLdx + 16 * kt + 8 * (f / 2) + 2 * t) =
            ds[kt][f];
  __syncthreads();
  if (r0 < c.S) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    transposed_times<T>(acc, sx, sq, r0, c.L, lane);
    store_rows<T>(a.dk, b, h, r0, c.S, acc, c.scale * c.drop_scale, lane);
  }
}

constexpr size_t kForwardSmem = 3 * kLen * kLd * 2 + kLen * kLdx * 2;
constexpr size_t kBackwardSmem = 4 * kLen * kLd * 2 + kLen * kLdx * 2 + 2 * kLen * sizeof(float);

bool applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
             double dropout_p) {
  const ScalarType dt = q.dtype();
  if (!flash_sdp_enabled() || (dt != kFloat16 && dt != kBFloat16) || mask.defined() || !(scale > 0) ||
      dropout_p >= 1 || get_device_properties(q.device().index).major < 8)  // mma.sync on bf16, cp.async
    return false;
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  return k.size(0) == B && v.size(0) == B && k.size(1) == H && v.size(1) == H && L >= 1 &&
         L <= kShortAttentionMaxLen && S >= 1 && S <= kShortAttentionMaxLen && q.size(3) == kD &&
         k.size(3) == kD && v.size(3) == kD && B * H <= INT32_MAX && rows_aligned(q) && rows_aligned(k) &&
         rows_aligned(v);
}

Common common(const Tensor& q, const Tensor& k, bool causal, double scale, double dropout_p,
              PhiloxState rng) {
  return {static_cast<int>(q.size(1)),
          static_cast<int>(q.size(2)),
          static_cast<int>(k.size(2)),
          static_cast<float>(scale),
          static_cast<float>(scale * 1.4426950408889634),
          causal,
          dropout_p > 0,
          static_cast<float>(ops::dropout_scale(dropout_p)),
          ops::DropoutMaskDraw(rng, dropout_p)};
}

template <class T>
void launch_forward(const SdpaFused& f, const Tensor& q, const Tensor& k, const Tensor& v, const Common& c) {
  ForwardArgs<T> a{rows_of<const T>(q),
                   rows_of<const T>(k),
                   rows_of<const T>(v),
                   rows_of<T>(f.out),
                   f.stats.defined() ? f.stats.data_ptr<float>() : nullptr,
                   f.rng.defined() ? f.rng.data_ptr<int64_t>() : nullptr,
                   c};
  auto kernel = &short_forward_kernel<T>;
  EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kForwardSmem));
  kernel<<<static_cast<unsigned>(q.size(0) * q.size(1)), kThreads, kForwardSmem, current_stream().stream()>>>(
      a);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <class T>
void launch_backward(const std::array<Tensor, 3>& grads, const Tensor& go, const Tensor& q, const Tensor& k,
                     const Tensor& v, const SdpaFused& f, const Common& c) {
  BackwardArgs<T> a{rows_of<const T>(q),
                    rows_of<const T>(k),
                    rows_of<const T>(v),
                    rows_of<const T>(f.out),
                    rows_of<const T>(go),
                    rows_of<T>(grads[0]),
                    rows_of<T>(grads[1]),
                    rows_of<T>(grads[2]),
                    f.stats.data_ptr<float>(),
                    f.rng.defined() ? f.rng.data_ptr<int64_t>() : nullptr,
                    c};
  auto kernel = &short_backward_kernel<T>;
  EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBackwardSmem));
  kernel<<<static_cast<unsigned>(q.size(0) * q.size(1)), kThreads, kBackwardSmem,
           current_stream().stream()>>>(a);
  EMBER_CUDA_LAUNCH_CHECK();
}

std::array<Tensor, 3> short_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const SdpaFused& fwd, bool is_causal,
                                               double scale, double dropout_p) {
  detail::check_on_current_device(kOp, q.device());
  const Tensor go = rows_aligned(grad_out)
                        ? grad_out
                        : empty_like_dense(grad_out.sizes(), fwd.out, q.dtype()).copy_(grad_out);
  std::array<Tensor, 3> grads = empty_qkv_grads(q, k, v, qkv_packed(q, k, v));
  // The draw's state is read from fwd.rng on the device.
  const Common c = common(q, k, is_causal, scale, dropout_p, PhiloxState{});
  if (q.dtype() == kFloat16)
    launch_backward<__half>(grads, go, q, k, v, fwd, c);
  else
    launch_backward<__nv_bfloat16>(grads, go, q, k, v, fwd, c);
  return grads;
}

}  // namespace

std::optional<SdpaFused> short_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, bool is_causal, double scale,
                                                 double dropout_p, PhiloxState rng, bool training) {
  if (!applies(q, k, v, mask, scale, dropout_p)) return std::nullopt;
  detail::check_on_current_device(kOp, q.device());
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2);
  const TensorOptions o = TensorOptions(kFloat32).device(q.device());
  SdpaFused f{empty_like_dense({B, H, L, kD}, q, q.dtype()),
              training ? empty({B, H, L, 1}, o) : Tensor(),
              Tensor(),
              training && dropout_p > 0 ? empty({2}, o.dtype(kInt64)) : Tensor(),
              "_scaled_dot_product_flash_attention",
              &short_attention_backward};
  const Common c = common(q, k, is_causal, scale, dropout_p, rng);
  if (q.dtype() == kFloat16)
    launch_forward<__half>(f, q, k, v, c);
  else
    launch_forward<__nv_bfloat16>(f, q, k, v, c);
  return f;
}

}  // namespace ember::cuda
