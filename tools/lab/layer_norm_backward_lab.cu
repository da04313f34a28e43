// Kernel lab (STYLE.md #9) for layer_norm's backward over bf16 rows of 1024, the row shape of
// the benchmark [32768, 1024] that cuda/normalization_kernels.cu missed its bandwidth bar on.
// Each candidate runs on the same inputs as ember's kernel (through the op registry), its results
// are compared with ember's (relative error ||lab - ember|| / ||ember||), and both are timed.
//  - bulk_backward_kernel: a warp per row, the rows of x and dy brought into shared memory by the
//    bulk copy engine (cp.async.bulk, an mbarrier per stage, kStages rows in flight per warp), the
//    dw and db column sums in registers. Session 8: 56.1-56.9 us alone (3 blocks of 167
//    registers per SM); with no math (dx = x + dy) 57.0 us, where PyTorch adds two such tensors
//    in 49.5 us; warps on contiguous row ranges slower (59.1 us) than interleaved.
//  - row_backward_kernel: rows in registers, kR rows a warp, a block per tile in tile order or
//    persistent, column sums in registers reduced over a thread-block cluster. Session 9: without
//    column sums a block per 4-row tile streams at the add's speed (49.6 us, 96 registers, 5
//    blocks/SM; persistent 51.5 us), with register column sums it is slow (168 registers,
//    3 blocks/SM: 86-89 us a block per tile, 57.9 us persistent).
//  - multi_row_backward_kernel: ember's design (a warp per row, persistent, the column sums in
//    shared memory) rebuilt lean, kRows rows a warp at once. Session 9: one row 54.2-55.0 us
//    alone, ember's kernel then about 60 us; two rows no faster (55.7-59.3 us). It moved into
//    cuda/ as layer_norm_backward_warp_kernel (51.8 us there under ncu; ember's old kernel took
//    31.7 M warp instructions where this one takes 19-23 M).
//  - fused_backward_kernel: that design with the column sums finished in the kernel, over
//    thread-block clusters and then by the last cluster to finish, where cuda/ runs a column-sum
//    kernel (4.9-5.3 us under ncu, and a launch). Session 10: slower than ember's two kernels
//    together, 58.4-61.6 us (clusters of 16, 8, 4) against 55.9-56.8 us, so cuda/ keeps them.
//   layer_norm_backward_lab [rows ...]
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ember/core/ops/normalization.h>
#include <ember/ember.h>

using namespace ember;

namespace {

constexpr int kN = 1024, kWarps = 4, kLanes = 32;
constexpr int kVecs = kN / 8;           // 16-byte vectors of 8 bf16 per row
constexpr int kSlots = kVecs / kLanes;  // vectors per lane: v = lane + 32 k
constexpr uint32_t kRowBytes = kN * 2;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "layer_norm_backward_lab: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Stage {
  uint4 x[kVecs], g[kVecs];
};

__device__ __forceinline__ uint32_t smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Lane 0: both rows of `row` into stage s, completing on its mbarrier.
__device__ __forceinline__ void issue(Stage& s, uint64_t& bar, const __nv_bfloat16* x,
                                      const __nv_bfloat16* gy, int64_t row) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(&bar)), "r"(2 * kRowBytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem(s.x)),
      "l"(x + row * kN), "r"(kRowBytes), "r"(smem(&bar))
      : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem(s.g)),
      "l"(gy + row * kN), "r"(kRowBytes), "r"(smem(&bar))
      : "memory");
}

__device__ __forceinline__ bool ready(uint64_t& bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(smem(&bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

__device__ __forceinline__ void unpack(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
    f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}

__device__ __forceinline__ uint4 pack(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    w[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return {w[0], w[1], w[2], w[3]};
}

// One row's backward from its 16-byte vectors (slot(k, x, dy, w) gives those of slot k): dx into
// dx_row, and with kSums the column terms of dw and db added to acc_w and acc_b.
template <bool kSums, class Slot>
__device__ __forceinline__ void row_backward(const Slot& slot, float mu, float rs, __nv_bfloat16* dx_row,
                                             int lane, float (&acc_w)[kSlots][8], float (&acc_b)[kSlots][8]) {
  float sa = 0.f, sb = 0.f;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    uint4 x8, g8, w8;
    slot(k, x8, g8, w8);
    float xv[8], gv[8], wv[8];
    unpack(x8, xv);
    unpack(g8, gv);
    unpack(w8, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float xh = (xv[j] - mu) * rs, gxh = gv[j] * wv[j];
      sa += gxh, sb += gxh * xh;
      if constexpr (kSums) acc_b[k][j] += gv[j], acc_w[k][j] += gv[j] * xh;
    }
  }
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2)
    sa += __shfl_xor_sync(0xffffffffu, sa, o), sb += __shfl_xor_sync(0xffffffffu, sb, o);
  const float c0 = -rs * (sa * (1.f / kN)), c1 = -rs * rs * (sb * (1.f / kN));
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    uint4 x8, g8, w8;
    slot(k, x8, g8, w8);
    float xv[8], gv[8], wv[8], o[8];
    unpack(x8, xv);
    unpack(g8, gv);
    unpack(w8, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = fmaf(gv[j] * wv[j], rs, fmaf(xv[j] - mu, c1, c0));
    reinterpret_cast<uint4*>(dx_row)[lane + kLanes * k] = pack(o);
  }
}

// The block's column sums, in warp order, into red[0, 2 kN) = [dw | db]; red holds kWarps * 2 kN
// floats. Call from every thread; ends with the sums written by this thread only.
__device__ __forceinline__ void block_column_sums(float* red, const float (&acc_w)[kSlots][8],
                                                  const float (&acc_b)[kSlots][8]) {
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = (lane + kLanes * k) * 8 + j;
      red[(warp * 2) * kN + c] = acc_w[k][j];
      red[(warp * 2 + 1) * kN + c] = acc_b[k][j];
    }
  __syncthreads();
  for (int c = threadIdx.x; c < 2 * kN; c += blockDim.x) {
    float sum = red[c];
    for (int v = 1; v < kWarps; ++v) sum += red[v * 2 * kN + c];
    red[c] = sum;
  }
}

// dx, and the block's column sums of gy * xhat and gy into partial[blockIdx.x] = [dw | db].
template <int kStages, int kMinBlocks, bool kChunked, bool kMath>
__global__ void __launch_bounds__(kWarps* kLanes, kMinBlocks)
    bulk_backward_kernel(__nv_bfloat16* dx, float* partial, const __nv_bfloat16* gy, const __nv_bfloat16* x,
                         const float* mean, const float* rstd, const __nv_bfloat16* w, int64_t rows) {
  extern __shared__ __align__(128) unsigned char shared[];
  auto* stages = reinterpret_cast<Stage*>(shared);  // [kWarps][kStages]
  auto* ws = reinterpret_cast<uint4*>(stages + kWarps * kStages);
  auto* bars = reinterpret_cast<uint64_t*>(ws + kVecs);  // [kWarps][kStages]
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  for (int i = threadIdx.x; i < kVecs; i += blockDim.x) ws[i] = reinterpret_cast<const uint4*>(w)[i];
  Stage* my = stages + warp * kStages;
  uint64_t* mb = bars + warp * kStages;
  // The warp's rows: every (warps in the grid)-th from its index, or a contiguous range.
  const int64_t gw = blockIdx.x * static_cast<int64_t>(kWarps) + warp,
                warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t per = (rows + warps - 1) / warps;
  const int64_t first = kChunked ? gw * per : gw, step = kChunked ? 1 : warps;
  const int64_t end = kChunked && first + per < rows ? first + per : rows;
  if (lane == 0) {
    for (int s = 0; s < kStages; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&mb[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int s = 0; s < kStages; ++s)
      if (first + s * step < end) issue(my[s], mb[s], x, gy, first + s * step);
  }
  __syncthreads();
  float acc_w[kSlots][8], acc_b[kSlots][8];
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc_w[k][j] = acc_b[k][j] = 0.f;
  int s = 0;
  uint32_t parity = 0;
  for (int64_t row = first; row < end; row += step) {
    const float mu = mean[row], rs = rstd[row];
    while (!ready(mb[s], parity)) {
    }
    const Stage& st = my[s];
    if constexpr (!kMath) {
      // The pipeline alone: dx = x + dy, no sums.
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        float xv[8], gv[8];
        unpack(st.x[lane + kLanes * k], xv);
        unpack(st.g[lane + kLanes * k], gv);
#pragma unroll
        for (int j = 0; j < 8; ++j) xv[j] += gv[j];
        reinterpret_cast<uint4*>(dx + row * kN)[lane + kLanes * k] = pack(xv);
      }
    } else {
      row_backward<true>(
          [&](int k, uint4& x8, uint4& g8, uint4& w8) {
            x8 = st.x[lane + kLanes * k], g8 = st.g[lane + kLanes * k], w8 = ws[lane + kLanes * k];
          },
          mu, rs, dx + row * kN, lane, acc_w, acc_b);
    }
    // Every lane has read the stage: lane 0 refills it (the copy engine writes what plain loads
    // read, hence the proxy fence).
    __syncwarp();
    if (lane == 0) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      if (const int64_t next = row + kStages * step; next < end) issue(my[s], mb[s], x, gy, next);
    }
    if (++s == kStages) s = 0, parity ^= 1;
  }
  // Every copy issued was waited on: the stages are free for the warps' column sums.
  __syncthreads();
  auto* red = reinterpret_cast<float*>(stages);  // [kWarps][2][kN]
  block_column_sums(red, acc_w, acc_b);
  for (int c = threadIdx.x; c < 2 * kN; c += blockDim.x) partial[blockIdx.x * 2 * kN + c] = red[c];
}

// The second candidate, to test whether the order in which rows stream matters: rows read into
// registers (as cuda/ does), kR consecutive rows per warp and kWarps * kR per block, the blocks
// either one per tile in tile order (as an elementwise kernel's blocks go) or persistent over
// the tiles. With kSums, the column sums in registers, added over the block and then over its
// cluster through distributed shared memory: one [dw | db] row of `partial` per cluster.
template <int kR, bool kPersistent, bool kSums>
__global__ void __launch_bounds__(kWarps* kLanes)
    row_backward_kernel(__nv_bfloat16* dx, float* partial, const __nv_bfloat16* gy, const __nv_bfloat16* x,
                        const float* mean, const float* rstd, const __nv_bfloat16* w, int64_t rows) {
  __shared__ float red[kSums ? kWarps * 2 * kN : 1];  // [warp][dw, db][kN]
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int64_t tiles = (rows + kWarps * kR - 1) / (kWarps * kR);
  float acc_w[kSlots][8], acc_b[kSlots][8];  // used with kSums
  if constexpr (kSums)
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc_w[k][j] = acc_b[k][j] = 0.f;
  for (int64_t t = blockIdx.x; t < tiles; t += kPersistent ? gridDim.x : tiles) {
    for (int r = 0; r < kR; ++r) {
      const int64_t row = (t * kWarps + warp) * kR + r;
      if (row >= rows) break;
      uint4 xr[kSlots], gr[kSlots];
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        xr[k] = reinterpret_cast<const uint4*>(x + row * kN)[lane + kLanes * k];
        gr[k] = reinterpret_cast<const uint4*>(gy + row * kN)[lane + kLanes * k];
      }
      row_backward<kSums>(
          [&](int k, uint4& x8, uint4& g8, uint4& w8) {
            x8 = xr[k], g8 = gr[k], w8 = reinterpret_cast<const uint4*>(w)[lane + kLanes * k];
          },
          mean[row], rstd[row], dx + row * kN, lane, acc_w, acc_b);
    }
  }
  if constexpr (kSums) {
    block_column_sums(red, acc_w, acc_b);
    // Then the cluster's, in block-rank order: block rank b adds up its share of the columns
    // from every block's shared memory. The second sync keeps each block's shared memory alive
    // until the others have read it.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int nb = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
    const int share = 2 * kN / nb;
    for (int c = rank * share + threadIdx.x; c < (rank + 1) * share; c += blockDim.x) {
      float sum = 0.f;
      for (int b = 0; b < nb; ++b) sum += cluster.map_shared_rank(red, b)[c];
      partial[(blockIdx.x / nb) * 2 * kN + c] = sum;
    }
    cluster.sync();
  }
}

// The third candidate, ember's design with kRows rows a warp at once: a warp holds kRows rows of x
// and dy in registers (the warps interleaved over the rows, persistent, as in cuda/), and adds
// the rows' dw and db terms to its copy of the column sums in shared memory once per kRows rows
// (cuda/ adds them once per row: 32 shared loads and stores of 16 bytes a lane per row). kRows 1
// is ember's kernel rebuilt here, the control; kMinBlocks caps the registers.
// The warps' column sums in shared memory: [warp][dw, db][slot k][half q][lane] of float4, lanes
// fastest (no bank conflicts).
constexpr int kWarpSums = kWarps * 2 * kSlots * 2 * kLanes;

// The rows' dx, and each warp's column sums into its copy in `sums` (kWarpSums float4).
template <int kRows>
__device__ __forceinline__ void warp_rows(float4* sums, __nv_bfloat16* dx, const __nv_bfloat16* gy,
                                          const __nv_bfloat16* x, const float* mean, const float* rstd,
                                          const __nv_bfloat16* w, int64_t rows) {
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  float4* mine = sums + warp * 2 * kSlots * 2 * kLanes + lane;
  for (int e = 0; e < 2 * kSlots * 2; ++e) mine[e * kLanes] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int64_t gw = blockIdx.x * static_cast<int64_t>(kWarps) + warp,
                step = static_cast<int64_t>(gridDim.x) * kWarps * kRows;
  uint4 w8[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) w8[k] = reinterpret_cast<const uint4*>(w)[lane + kLanes * k];
  for (int64_t r0 = gw * kRows; r0 < rows; r0 += step) {
    uint4 xr[kRows][kSlots], gr[kRows][kSlots];
    float mu[kRows], rs[kRows], sa[kRows], sb[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t row = r0 + i < rows ? r0 + i : r0;  // a missing row repeats the first, not summed
      mu[i] = mean[row], rs[i] = rstd[row], sa[i] = sb[i] = 0.f;
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        xr[i][k] = reinterpret_cast<const uint4*>(x + row * kN)[lane + kLanes * k];
        gr[i][k] = reinterpret_cast<const uint4*>(gy + row * kN)[lane + kLanes * k];
      }
    }
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      float wv[8], tw[8], tb[8];
      unpack(w8[k], wv);
#pragma unroll
      for (int j = 0; j < 8; ++j) tw[j] = tb[j] = 0.f;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        float xv[8], gv[8];
        unpack(xr[i][k], xv);
        unpack(gr[i][k], gv);
        const bool in = r0 + i < rows;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xh = (xv[j] - mu[i]) * rs[i], gxh = gv[j] * wv[j];
          sa[i] += gxh, sb[i] += gxh * xh;
          if (in) tb[j] += gv[j], tw[j] += gv[j] * xh;
        }
      }
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float4& ew = mine[((0 * kSlots + k) * 2 + q) * kLanes];
        float4& eb = mine[((1 * kSlots + k) * 2 + q) * kLanes];
        float4 a = ew, b = eb;
        a.x += tw[4 * q], a.y += tw[4 * q + 1], a.z += tw[4 * q + 2], a.w += tw[4 * q + 3];
        b.x += tb[4 * q], b.y += tb[4 * q + 1], b.z += tb[4 * q + 2], b.w += tb[4 * q + 3];
        ew = a, eb = b;
      }
    }
#pragma unroll
    for (int o = kLanes / 2; o > 0; o /= 2)
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        sa[i] += __shfl_xor_sync(0xffffffffu, sa[i], o), sb[i] += __shfl_xor_sync(0xffffffffu, sb[i], o);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (r0 + i >= rows) break;
      const float c0 = -rs[i] * (sa[i] * (1.f / kN)), c1 = -rs[i] * rs[i] * (sb[i] * (1.f / kN));
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        float xv[8], gv[8], wv[8], o[8];
        unpack(xr[i][k], xv);
        unpack(gr[i][k], gv);
        unpack(w8[k], wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = fmaf(gv[j] * wv[j], rs[i], fmaf(xv[j] - mu[i], c1, c0));
        reinterpret_cast<uint4*>(dx + (r0 + i) * kN)[lane + kLanes * k] = pack(o);
      }
    }
  }
}

// The block's sum of column c of [dw | db], in warp order, from the warps' copies (after a
// __syncthreads).
__device__ __forceinline__ float block_sum(const float4* sums, int c) {
  const int which = c / kN, col = c % kN, v = col / 8, j = col % 8;
  const int k = v / kLanes, l = v % kLanes, q = j / 4;
  float sum = 0.f;
  for (int wp = 0; wp < kWarps; ++wp)
    sum += reinterpret_cast<const float*>(
        &sums[wp * 2 * kSlots * 2 * kLanes + ((which * kSlots + k) * 2 + q) * kLanes + l])[j % 4];
  return sum;
}

template <int kRows, int kMinBlocks>
__global__ void __launch_bounds__(kWarps* kLanes, kMinBlocks)
    multi_row_backward_kernel(__nv_bfloat16* dx, float* partial, const __nv_bfloat16* gy,
                              const __nv_bfloat16* x, const float* mean, const float* rstd,
                              const __nv_bfloat16* w, int64_t rows) {
  __shared__ float4 sums[kWarpSums];
  warp_rows<kRows>(sums, dx, gy, x, mean, rstd, w, rows);
  __syncthreads();
  for (int c = threadIdx.x; c < 2 * kN; c += blockDim.x) partial[blockIdx.x * 2 * kN + c] = block_sum(sums, c);
}

// The fourth candidate, multi_row_backward_kernel<1> with its column sums finished in the kernel
// (no column-sum kernel, no launch gap): each cluster of kCluster blocks adds up its blocks' sums
// through distributed shared memory into one partial row, and the last cluster to finish (a
// ticket from an atomic counter) adds up the partial rows, a share of the columns per block, in
// partial-row order (the result does not vary from run to run). The counter is the lab's alone
// (one launch at a time); the last cluster sets it back to 0.
__device__ unsigned int g_clusters_done;

template <int kCluster>
__global__ void __launch_bounds__(kWarps* kLanes)
    fused_backward_kernel(__nv_bfloat16* dx, float* partial, __nv_bfloat16* dw, __nv_bfloat16* db,
                          const __nv_bfloat16* gy, const __nv_bfloat16* x, const float* mean,
                          const float* rstd, const __nv_bfloat16* w, int64_t rows) {
  namespace cg = cooperative_groups;
  __shared__ float4 sums[kWarpSums];
  __shared__ float block[2 * kN];  // the block's column sums
  __shared__ unsigned int ticket;
  warp_rows<1>(sums, dx, gy, x, mean, rstd, w, rows);
  __syncthreads();
  for (int c = threadIdx.x; c < 2 * kN; c += blockDim.x) block[c] = block_sum(sums, c);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  constexpr int kShare = 2 * kN / kCluster;  // columns a block of the cluster finishes
  const int rank = static_cast<int>(cluster.block_rank());
  const unsigned int clusters = gridDim.x / kCluster, id = blockIdx.x / kCluster;
  for (int c = rank * kShare + threadIdx.x; c < (rank + 1) * kShare; c += blockDim.x) {
    float sum = 0.f;
    for (int b = 0; b < kCluster; ++b) sum += cluster.map_shared_rank(block, b)[c];
    partial[id * 2 * kN + c] = sum;
  }
  __threadfence();  // the partial row, seen by whichever cluster finishes last
  cluster.sync();
  if (rank == 0 && threadIdx.x == 0) ticket = atomicAdd(&g_clusters_done, 1u);
  cluster.sync();
  const bool last = *cluster.map_shared_rank(&ticket, 0) == clusters - 1;
  cluster.sync();  // rank 0's ticket stays readable until every block has read it
  if (!last) return;
  __threadfence();
  // kShare columns as float4 (kShare / 4 of them) down `clusters` rows, the rows split over the
  // block's threads in kPhases, each phase's sums then added in phase order.
  constexpr int kCols4 = kShare / 4, kPhases = kWarps * kLanes / kCols4;
  static_assert(kPhases >= 1 && kWarps * kLanes % kCols4 == 0);
  const int c4 = threadIdx.x % kCols4, phase = threadIdx.x / kCols4;
  const auto* p4 = reinterpret_cast<const float4*>(partial);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
  for (unsigned int r = phase; r < clusters; r += kPhases) {
    const float4 v = __ldcg(&p4[r * (2 * kN / 4) + rank * kCols4 + c4]);
    acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
  }
  auto* phase_sums = reinterpret_cast<float4*>(block);  // [kPhases][kCols4], block[] is free now
  __syncthreads();
  phase_sums[phase * kCols4 + c4] = acc;
  __syncthreads();
  if (phase == 0) {
    for (int ph = 1; ph < kPhases; ++ph) {
      const float4 v = phase_sums[ph * kCols4 + c4];
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    const float out[4] = {acc.x, acc.y, acc.z, acc.w};
    for (int j = 0; j < 4; ++j) {
      const int c = rank * kShare + c4 * 4 + j;
      (c < kN ? dw : db)[c % kN] = __float2bfloat16_rn(out[j]);
    }
  }
  if (rank == 0 && threadIdx.x == 0) g_clusters_done = 0;
}

// dw[c] and db[c] = the sums over `splits` rows of partial [splits, 2, kN], a thread per column.
__global__ void column_sum_kernel(__nv_bfloat16* dw, __nv_bfloat16* db, const float* partial,
                                  int64_t splits) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= 2 * kN) return;
  float a[4] = {0.f, 0.f, 0.f, 0.f};
  int64_t s = 0;
  for (; s + 4 <= splits; s += 4)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] += partial[(s + i) * 2 * kN + c];
  for (; s < splits; ++s) a[0] += partial[s * 2 * kN + c];
  const float sum = (a[0] + a[1]) + (a[2] + a[3]);
  (c < kN ? dw : db)[c % kN] = __float2bfloat16_rn(sum);
}

// Median over 5 runs of the mean of 20 back-to-back calls, in microseconds.
double time_us(const std::function<void()>& f) {
  for (int i = 0; i < 5; ++i) f();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    check(cudaEventRecord(a), "record");
    for (int i = 0; i < 20; ++i) f();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms * 1000.0 / 20);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

// ||a - b|| / ||b|| over all elements.
double rel_err(const Tensor& a, const Tensor& b) {
  Tensor d = (a.to(kFloat64) - b.to(kFloat64)).cpu();
  Tensor r = b.to(kFloat64).cpu();
  return std::sqrt(d.square().sum().item<double>() / r.square().sum().item<double>());
}

__nv_bfloat16* bf16_ptr(const Tensor& t) { return static_cast<__nv_bfloat16*>(t.data_ptr()); }
const float* f32_ptr(const Tensor& t) { return static_cast<const float*>(t.data_ptr()); }

// How a candidate leaves dw and db: not at all, as partial rows for the lab's column-sum kernel,
// or in the outputs itself.
enum class Sums { kNone, kPartial, kFused };

// One comparison: random bf16 inputs of `rows` rows and their statistics, ember's gradients, and
// NaN-filled buffers for a lab kernel's (every element it misses shows in the error), with
// `splits` rows of column-sum partials.
struct Case {
  int64_t rows, splits;
  Tensor x, gy, w, mean, rstd, dx, dw, db, ldx, ldw, ldb, partial;

  Case(int64_t rows_, int64_t splits_) : rows(rows_), splits(splits_) {
    TensorOptions o = TensorOptions(kBFloat16).device(kCUDA);
    x = randn({rows, kN}, o), gy = randn({rows, kN}, o), w = randn({kN}, o);
    Tensor y;
    std::tie(y, mean, rstd) = native_layer_norm(x, {kN}, w, randn({kN}, o), 1e-5);
    dx = empty({rows, kN}, o), dw = empty({kN}, o), db = empty({kN}, o);
    ldx = full({rows, kN}, std::nan(""), o), ldw = full({kN}, std::nan(""), o),
    ldb = full({kN}, std::nan(""), o);
    partial = empty({splits, 2, kN}, TensorOptions(kFloat32).device(kCUDA));
  }
  void ember_backward() const { layer_norm_backward_stub(kCUDA)(dx, dw, db, gy, x, mean, rstd, w); }
  void column_sums() const {
    column_sum_kernel<<<2 * kN / 128, 128>>>(bf16_ptr(ldw), bf16_ptr(ldb), f32_ptr(partial), splits);
  }

  // Runs both once, compares, times ember's backward, the lab's kernel alone and `lab` (the
  // kernel and its column sums), and prints a line: `what`, then the figures. Without `checked`
  // (a kernel that computes something else) the errors are printed but not judged.
  void report(const std::string& what, const cudaFuncAttributes& attr, int per_sm,
              const std::function<void()>& kernel, Sums sums, bool checked) const {
    auto lab = [&] {
      kernel();
      if (sums == Sums::kPartial) column_sums();
    };
    ember_backward();
    lab();
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "run");
    const bool summed = sums != Sums::kNone;
    const double e_dx = rel_err(ldx, dx), e_dw = summed ? rel_err(ldw, dw) : 0,
                 e_db = summed ? rel_err(ldb, db) : 0;
    const double t_ember = time_us([&] { ember_backward(); }), t_lab = time_us(lab),
                 t_kernel = time_us(kernel);
    const double bytes = 3.0 * rows * kN * 2;  // reads x and dy, writes dx
    const char* verdict = !checked                                    ? "(not checked)"
                          : e_dx < 1e-2 && e_dw < 1e-2 && e_db < 1e-2 ? "ok"
                                                                      : "MISMATCH";
    std::printf(
        "rows %6lld, %s: %3d registers, %d blocks/SM, %lld partial rows | ember %6.1f us %4.2f TB/s | lab "
        "%6.1f us "
        "(its kernel alone %6.1f us, %4.2f TB/s) | rel err dx %.1e dw %.1e db %.1e %s\n",
        static_cast<long long>(rows), what.c_str(), attr.numRegs, per_sm, static_cast<long long>(splits),
        t_ember, bytes / t_ember / 1e6, t_lab, t_kernel, bytes / t_kernel / 1e6, e_dx, e_dw, e_db, verdict);
  }
};

template <class K>
std::pair<cudaFuncAttributes, int> launch_facts(K kernel, size_t shared) {
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * kLanes, shared), "occupancy");
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, kernel), "attributes");
  return {attr, per_sm};
}

int64_t sms() { return ember::cuda::get_device_properties(0).multi_processor_count; }

// The bulk-copy kernel, persistent (as many blocks as fit at once).
template <int kStages, int kMinBlocks, bool kChunked = false, bool kMath = true>
void run(int64_t rows) {
  constexpr size_t kShared = sizeof(Stage) * kWarps * kStages + kVecs * 16 + kWarps * kStages * 8;
  auto kernel = bulk_backward_kernel<kStages, kMinBlocks, kChunked, kMath>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared), "smem attribute");
  const auto [attr, per_sm] = launch_facts(kernel, kShared);
  const Case c(rows, std::min<int64_t>(per_sm * sms(), (rows + kWarps - 1) / kWarps));
  auto launch = [&] {
    kernel<<<static_cast<unsigned>(c.splits), kWarps * kLanes, kShared>>>(
        bf16_ptr(c.ldx), static_cast<float*>(c.partial.data_ptr()), bf16_ptr(c.gy), bf16_ptr(c.x),
        f32_ptr(c.mean), f32_ptr(c.rstd), bf16_ptr(c.w), rows);
  };
  c.report("bulk copies, " + std::to_string(kStages) + " stages, " +
               (kChunked ? "contiguous" : "interleaved") + " rows" + (kMath ? "" : ", no math (dx = x + dy)"),
           attr, per_sm, launch, kMath ? Sums::kPartial : Sums::kNone, kMath);
}

// The row kernel: kR rows per warp, a block per tile or kPersistent; with kSums its column sums
// reduced over clusters of `cluster` blocks (1, 2, 4 or 8).
template <int kR, bool kPersistent, bool kSums>
void run_rows(int64_t rows, int cluster) {
  auto kernel = row_backward_kernel<kR, kPersistent, kSums>;
  const auto [attr, per_sm] = launch_facts(kernel, 0);
  const int64_t tiles = (rows + kWarps * kR - 1) / (kWarps * kR);
  int64_t grid = kPersistent ? std::min<int64_t>(per_sm * sms(), tiles) : tiles;
  grid = (grid + cluster - 1) / cluster * cluster;  // whole clusters; the extra blocks find no rows
  const Case c(rows, grid / cluster);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kWarps * kLanes);
  cudaLaunchAttribute cluster_dim[1];
  cluster_dim[0].id = cudaLaunchAttributeClusterDimension;
  cluster_dim[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  cluster_dim[0].val.clusterDim.y = cluster_dim[0].val.clusterDim.z = 1;
  cfg.attrs = cluster_dim;
  cfg.numAttrs = 1;
  auto launch = [&] {
    check(cudaLaunchKernelEx(&cfg, kernel, bf16_ptr(c.ldx), static_cast<float*>(c.partial.data_ptr()),
                             bf16_ptr(c.gy), bf16_ptr(c.x), f32_ptr(c.mean), f32_ptr(c.rstd), bf16_ptr(c.w),
                             rows),
          "launch");
  };
  c.report(std::string("rows in registers, ") + std::to_string(kR) + " a warp, " +
               (kPersistent ? "persistent" : "a block per tile") +
               (kSums ? ", column sums over clusters of " + std::to_string(cluster) : ", no column sums"),
           attr, per_sm, launch, kSums ? Sums::kPartial : Sums::kNone, true);
}

// The multi-row kernel, persistent.
template <int kRows, int kMinBlocks>
void run_multi(int64_t rows) {
  auto kernel = multi_row_backward_kernel<kRows, kMinBlocks>;
  const auto [attr, per_sm] = launch_facts(kernel, 0);
  const Case c(rows, std::min<int64_t>(per_sm * sms(), (rows + kWarps * kRows - 1) / (kWarps * kRows)));
  auto launch = [&] {
    kernel<<<static_cast<unsigned>(c.splits), kWarps * kLanes>>>(
        bf16_ptr(c.ldx), static_cast<float*>(c.partial.data_ptr()), bf16_ptr(c.gy), bf16_ptr(c.x),
        f32_ptr(c.mean), f32_ptr(c.rstd), bf16_ptr(c.w), rows);
  };
  c.report("ember's design, " + std::to_string(kRows) + " rows a warp at once", attr, per_sm, launch,
           Sums::kPartial, true);
}

// The fused kernel, persistent: as many clusters of kCluster blocks as run at once.
template <int kCluster>
void run_fused(int64_t rows) {
  auto kernel = fused_backward_kernel<kCluster>;
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(kWarps * kLanes);
  cudaLaunchAttribute cluster_dim[1];
  cluster_dim[0].id = cudaLaunchAttributeClusterDimension;
  cluster_dim[0].val.clusterDim.x = kCluster;
  cluster_dim[0].val.clusterDim.y = cluster_dim[0].val.clusterDim.z = 1;
  cfg.attrs = cluster_dim;
  cfg.numAttrs = 1;
  cfg.gridDim = dim3(kCluster);
  int clusters = 0;
  // A size past the portable 8 may be refused: a line saying so, not the end of the lab.
  cudaError_t e = kCluster > 8 ? cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)
                               : cudaSuccess;
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
  if (e != cudaSuccess || clusters == 0) {
    cudaGetLastError();  // clears the error, if any
    std::printf("rows %6lld, clusters of %d: none fits (%s)\n", static_cast<long long>(rows), kCluster,
                cudaGetErrorString(e));
    return;
  }
  const auto [attr, per_sm] = launch_facts(kernel, 0);
  const Case c(rows, clusters);
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * kCluster));
  auto launch = [&] {
    check(cudaLaunchKernelEx(&cfg, kernel, bf16_ptr(c.ldx), static_cast<float*>(c.partial.data_ptr()),
                             bf16_ptr(c.ldw), bf16_ptr(c.ldb), bf16_ptr(c.gy), bf16_ptr(c.x), f32_ptr(c.mean),
                             f32_ptr(c.rstd), bf16_ptr(c.w), rows),
          "launch");
  };
  c.report("ember's design, column sums finished in the kernel over clusters of " + std::to_string(kCluster),
           attr, per_sm, launch, Sums::kFused, true);
}

}  // namespace

int main(int argc, char** argv) {
  if (!ember::cuda::is_available()) {
    std::printf("layer_norm_backward_lab: no CUDA device\n");
    return 1;
  }
  std::vector<int64_t> sizes = {4096, 32768};
  if (argc > 1) sizes.clear();
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  for (int64_t rows : sizes) {
    run_multi<1, 1>(rows);
    run_fused<4>(rows);
    run_fused<8>(rows);
    run_multi<1, 4>(rows);
    run_multi<2, 1>(rows);
    run_multi<2, 3>(rows);
    run_multi<2, 4>(rows);
    run<2, 1>(rows);
    run<3, 1>(rows);
    run<2, 1, false, false>(rows);
    run<2, 1, true>(rows);
    run<2, 1, true, false>(rows);
    run_rows<1, false, false>(rows, 1);
    run_rows<4, false, false>(rows, 1);
    run_rows<1, true, false>(rows, 1);
    run_rows<4, false, true>(rows, 8);
    run_rows<4, false, true>(rows, 1);
    run_rows<1, true, true>(rows, 1);
    run_fused<16>(rows);
  }
  return 0;
}
