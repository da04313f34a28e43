// Fused attention forward (FlashAttention's algorithm, Dao et al. 2022) for f16/bf16 and head
// dims 64 and 128. A block of 4 warps takes 64 queries of one batch entry and walks the keys in
// tiles of 64: S = Q K^T on tensor cores (WMMA), an online softmax per row (running max m and
// sum l; earlier output rescaled by exp(m_old - m_new)), then O += P V on tensor cores with P
// rounded to the inputs' dtype. Each warp owns 16 query rows end to end, so warps meet only at
// the K/V tile loads. Scores, P and the float32 output accumulator live in shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <atomic>
#include <cmath>

#include "ember/cuda/attention_flash.h"
#include "ember/cuda/attention_layout.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {

namespace {
std::atomic<bool> g_flash_enabled{true};
}  // namespace

void enable_flash_sdp(bool enabled) { g_flash_enabled.store(enabled, std::memory_order_relaxed); }
bool flash_sdp_enabled() { return g_flash_enabled.load(std::memory_order_relaxed); }

namespace {

using namespace nvcuda;

constexpr int kTile = 64;  // queries per block, keys per step
constexpr int kWarps = 4, kThreads = kWarps * kWarpSize, kRowsPerWarp = kTile / kWarps;
constexpr int kMaxBatchDims = 8;

// Flat batch index -> element offsets of q, k and v (out is contiguous).
struct BatchIndex {
  int nb;
  int64_t sizes[kMaxBatchDims];
  int64_t q[kMaxBatchDims], k[kMaxBatchDims], v[kMaxBatchDims];
};

// Shared memory: Q, K, V tiles [64, D] (16-bit), scores [64, 64] and output [64, D] (float32),
// P [64, 64] (16-bit), then the running max and sum per row. Leading dims padded against bank
// conflicts; every buffer and every 16-row block starts 32-byte aligned, as WMMA needs.
template <int D>
struct Layout {
  static constexpr int kLdh = D + 8, kLds = kTile + 4, kLdp = kTile + 8, kLdo = D + 4;
  static constexpr size_t kQ = 0, kK = kQ + kTile * kLdh * 2, kV = kK + kTile * kLdh * 2,
                          kS = kV + kTile * kLdh * 2, kP = kS + kTile * kLds * 4, kO = kP + kTile * kLdp * 2,
                          kM = kO + kTile * kLdo * 4, kL = kM + kTile * 4, kBytes = kL + kTile * 4;
};

template <class T>
__device__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(x);
  else
    return __float2bfloat16_rn(x);
}

// Rows [r0, r0 + 64) of a [rows, D] matrix (row stride `ld`, 16-byte aligned rows) into shared
// memory, zeros past the last row.
template <class T, int D>
__device__ void load_tile(T* dst, const T* src, int64_t ld, int64_t r0, int64_t rows) {
  constexpr int kVec = 16 / sizeof(T), kPerRow = D / kVec;
  for (int i = threadIdx.x; i < kTile * kPerRow; i += kThreads) {
    const int r = i / kPerRow, c = i % kPerRow * kVec;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) val = *reinterpret_cast<const uint4*>(src + (r0 + r) * ld + c);
    *reinterpret_cast<uint4*>(dst + r * Layout<D>::kLdh + c) = val;
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                         T* __restrict__ out, int64_t batch, int64_t L, int64_t S, int64_t ldq, int64_t ldk,
                         int64_t ldv, BatchIndex index, bool causal, float scale) {
  using Lay = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem + Lay::kQ);
  T* sk = reinterpret_cast<T*>(smem + Lay::kK);
  T* sv = reinterpret_cast<T*>(smem + Lay::kV);
  float* ss = reinterpret_cast<float*>(smem + Lay::kS);
  T* sp = reinterpret_cast<T*>(smem + Lay::kP);
  float* so = reinterpret_cast<float*>(smem + Lay::kO);
  float* sm = reinterpret_cast<float*>(smem + Lay::kM);
  float* sl = reinterpret_cast<float*>(smem + Lay::kL);
  constexpr float kNegInf = -INFINITY;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, w0 = warp * kRowsPerWarp;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t q_end = q0 + kTile < L ? q0 + kTile : L;
  // Causal: query i sees keys j <= i, so this block needs keys below its last query + 1.
  const int64_t kv_end = causal && q_end < S ? q_end : S;

  for (int64_t b = blockIdx.y; b < batch; b += gridDim.y) {
    int64_t oq = 0, ok = 0, ov = 0, rest = b;
    for (int d = index.nb - 1; d >= 0; --d) {
      const int64_t i = rest % index.sizes[d];
      rest /= index.sizes[d];
      oq += i * index.q[d], ok += i * index.k[d], ov += i * index.v[d];
    }
    __syncthreads();  // the previous batch entry is done with shared memory
    load_tile<T, D>(sq, q + oq, ldq, q0, L);
    for (int i = threadIdx.x; i < kTile * D; i += kThreads) so[i / D * Lay::kLdo + i % D] = 0.f;
    for (int i = threadIdx.x; i < kTile; i += kThreads) sm[i] = kNegInf, sl[i] = 0.f;

    for (int64_t k0 = 0; k0 < kv_end; k0 += kTile) {
      __syncthreads();  // every warp is done with the previous K/V tile
      load_tile<T, D>(sk, k + ok, ldk, k0, S);
      load_tile<T, D>(sv, v + ov, ldv, k0, S);
      __syncthreads();

      // This warp's scores [16, 64] = Q rows . K rows.
      for (int n = 0; n < kTile / 16; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
        for (int kk = 0; kk < D / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
          wmma::load_matrix_sync(fa, sq + w0 * Lay::kLdh + kk * 16, Lay::kLdh);
          wmma::load_matrix_sync(fb, sk + n * 16 * Lay::kLdh + kk * 16, Lay::kLdh);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(ss + w0 * Lay::kLds + n * 16, acc, Lay::kLds, wmma::mem_row_major);
      }
      __syncwarp();

      // Online softmax, one row at a time, two columns per lane.
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = w0 + r;
        const int64_t qi = q0 + row, j0 = k0 + lane, j1 = j0 + kWarpSize;
        float x0 = ss[row * Lay::kLds + lane] * scale, x1 = ss[row * Lay::kLds + lane + kWarpSize] * scale;
        if (j0 >= S || (causal && j0 > qi)) x0 = kNegInf;
        if (j1 >= S || (causal && j1 > qi)) x1 = kNegInf;
        const float m_old = sm[row];
        const float m_new = fmaxf(m_old, warp_reduce(fmaxf(x0, x1), MaxOp()));
        const float alpha = m_new == kNegInf ? 1.f : expf(m_old - m_new);
        const float p0 = x0 == kNegInf ? 0.f : expf(x0 - m_new), p1 = x1 == kNegInf ? 0.f : expf(x1 - m_new);
        sp[row * Lay::kLdp + lane] = from_float<T>(p0);
        sp[row * Lay::kLdp + lane + kWarpSize] = from_float<T>(p1);
        const float sum = warp_reduce(p0 + p1, SumOp());
        for (int c = lane; c < D; c += kWarpSize) so[row * Lay::kLdo + c] *= alpha;
        __syncwarp();  // every lane has read sm[row]
        if (lane == 0) sm[row] = m_new, sl[row] = sl[row] * alpha + sum;
      }
      __syncwarp();

      // This warp's output rows [16, D] += P [16, 64] . V [64, D].
      for (int n = 0; n < D / 16; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, so + w0 * Lay::kLdo + n * 16, Lay::kLdo, wmma::mem_row_major);
        for (int kk = 0; kk < kTile / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, sp + w0 * Lay::kLdp + kk * 16, Lay::kLdp);
          wmma::load_matrix_sync(fb, sv + kk * 16 * Lay::kLdh + n * 16, Lay::kLdh);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(so + w0 * Lay::kLdo + n * 16, acc, Lay::kLdo, wmma::mem_row_major);
      }
      __syncwarp();
    }

    T* ob = out + b * L * D;
    for (int r = 0; r < kRowsPerWarp && q0 + w0 + r < L; ++r) {
      const int row = w0 + r;
      const float inv = 1.f / sl[row];
      for (int c = lane; c < D; c += kWarpSize)
        ob[(q0 + row) * D + c] = from_float<T>(so[row * Lay::kLdo + c] * inv);
    }
  }
}

template <class T, int D>
void launch(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const BatchIndex& index,
            int64_t batch, bool causal, double scale) {
  const int64_t L = q.size(-2), S = k.size(-2);
  auto kernel = &flash_forward_kernel<T, D>;
  constexpr auto bytes = static_cast<int>(Layout<D>::kBytes);
  EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(L, kTile)),
                  static_cast<unsigned>(batch < 65535 ? batch : 65535));
  kernel<<<grid, kThreads, bytes, current_stream().stream()>>>(
      static_cast<const T*>(q.data_ptr()), static_cast<const T*>(k.data_ptr()),
      static_cast<const T*>(v.data_ptr()), static_cast<T*>(out.data_ptr()), batch, L, S, q.stride(-2),
      k.stride(-2), v.stride(-2), index, causal, static_cast<float>(scale));
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool flash_attention_forward(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                             bool is_causal, double scale) {
  const ScalarType dt = q.dtype();
  const int64_t nb = q.dim() - 2, L = q.size(-2), S = k.size(-2), E = q.size(-1);
  if (!flash_sdp_enabled() || !is_reduced_float(dt) || (E != 64 && E != 128) || k.size(-1) != E ||
      v.size(-1) != E || L == 0 || S == 0 || nb > kMaxBatchDims || !rows_aligned(q) || !rows_aligned(k) ||
      !rows_aligned(v))
    return false;
  BatchIndex index{};
  index.nb = static_cast<int>(nb);
  for (int64_t d = 0; d < nb; ++d) {
    index.sizes[d] = q.size(d);
    index.q[d] = q.stride(d), index.k[d] = k.stride(d), index.v[d] = v.stride(d);
  }
  const int64_t batch = out.numel() / (L * E);
  if (dt == kFloat16)
    E == 64 ? launch<__half, 64>(out, q, k, v, index, batch, is_causal, scale)
            : launch<__half, 128>(out, q, k, v, index, batch, is_causal, scale);
  else
    E == 64 ? launch<__nv_bfloat16, 64>(out, q, k, v, index, batch, is_causal, scale)
            : launch<__nv_bfloat16, 128>(out, q, k, v, index, batch, is_causal, scale);
  return true;
}

}  // namespace ember::cuda
