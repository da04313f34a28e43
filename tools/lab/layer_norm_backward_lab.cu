// Kernel lab (STYLE.md #9) for layer_norm's backward over bf16 rows of 1024, the row shape of
// the benchmark [32768, 1024] that cuda/normalization_kernels.cu misses its bandwidth bar on.
// The kernel tried here: a warp per row, the rows of x and dy brought into shared memory by the
// bulk copy engine (cp.async.bulk, an mbarrier per stage, kStages rows in flight per warp), so
// that no register holds a row while its loads are in flight, and the dw and db column sums in
// registers. It runs on the same inputs as ember's kernel (through the op registry), its results
// are compared with ember's (relative error ||lab - ember|| / ||ember||), and both are timed.
// Measured on the H200 (session 8, [32768, 1024]): the lab kernel alone 56.1-56.4 us (3 blocks of
// 167 registers per SM); ember's backward 64-66 us, of which its column-sum kernel takes 4.6 us
// under ncu; the lab's pipeline with no math (dx = x + dy) 57.2-57.6 us, where PyTorch adds two
// such tensors in 49.5 us: the per-warp row stream, not the arithmetic, is what stays slower.
//   layer_norm_backward_lab [rows ...]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
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
      float sa = 0.f, sb = 0.f;
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        float xv[8], gv[8], wv[8];
        unpack(st.x[lane + kLanes * k], xv);
        unpack(st.g[lane + kLanes * k], gv);
        unpack(ws[lane + kLanes * k], wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xh = (xv[j] - mu) * rs, gxh = gv[j] * wv[j];
          sa += gxh, sb += gxh * xh;
          acc_b[k][j] += gv[j], acc_w[k][j] += gv[j] * xh;
        }
      }
#pragma unroll
      for (int o = kLanes / 2; o > 0; o /= 2)
        sa += __shfl_xor_sync(0xffffffffu, sa, o), sb += __shfl_xor_sync(0xffffffffu, sb, o);
      const float c0 = -rs * (sa * (1.f / kN)), c1 = -rs * rs * (sb * (1.f / kN));
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        float xv[8], gv[8], wv[8], o[8];
        unpack(st.x[lane + kLanes * k], xv);
        unpack(st.g[lane + kLanes * k], gv);
        unpack(ws[lane + kLanes * k], wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = fmaf(gv[j] * wv[j], rs, fmaf(xv[j] - mu, c1, c0));
        reinterpret_cast<uint4*>(dx + row * kN)[lane + kLanes * k] = pack(o);
      }
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
    const int which = c / kN, col = c % kN;
    float sum = 0.f;
    for (int v = 0; v < kWarps; ++v) sum += red[(v * 2 + which) * kN + col];
    partial[blockIdx.x * 2 * kN + c] = sum;
  }
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

template <int kStages, int kMinBlocks, bool kChunked = false, bool kMath = true>
void run(int64_t rows) {
  constexpr size_t kShared = sizeof(Stage) * kWarps * kStages + kVecs * 16 + kWarps * kStages * 8;
  auto kernel = bulk_backward_kernel<kStages, kMinBlocks, kChunked, kMath>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared), "smem attribute");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * kLanes, kShared),
        "occupancy");
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, kernel), "attributes");
  const int64_t splits =
      std::min<int64_t>(static_cast<int64_t>(per_sm) * cuda::get_device_properties(0).multi_processor_count,
                        (rows + kWarps - 1) / kWarps);

  TensorOptions o = TensorOptions(kBFloat16).device(kCUDA);
  Tensor x = randn({rows, kN}, o), gy = randn({rows, kN}, o), w = randn({kN}, o), b = randn({kN}, o);
  auto [y, mean, rstd] = native_layer_norm(x, {kN}, w, b, 1e-5);
  Tensor dx = empty({rows, kN}, o), dw = empty({kN}, o), db = empty({kN}, o);
  Tensor ldx = full({rows, kN}, std::nan(""), o), ldw = full({kN}, std::nan(""), o),
         ldb = full({kN}, std::nan(""), o);
  Tensor partial = empty({splits, 2, kN}, TensorOptions(kFloat32).device(kCUDA));
  auto* p = static_cast<float*>(partial.data_ptr());
  auto bf = [](const Tensor& t) { return static_cast<__nv_bfloat16*>(t.data_ptr()); };
  auto f32 = [](const Tensor& t) { return static_cast<const float*>(t.data_ptr()); };
  auto ember_backward = [&] { layer_norm_backward_stub(kCUDA)(dx, dw, db, gy, x, mean, rstd, w); };
  auto lab_kernel = [&] {
    kernel<<<static_cast<unsigned>(splits), kWarps * kLanes, kShared>>>(bf(ldx), p, bf(gy), bf(x), f32(mean),
                                                                        f32(rstd), bf(w), rows);
  };
  auto lab_backward = [&] {
    lab_kernel();
    column_sum_kernel<<<2 * kN / 128, 128>>>(bf(ldw), bf(ldb), p, splits);
  };
  ember_backward();
  lab_backward();
  check(cudaGetLastError(), "launch");
  check(cudaDeviceSynchronize(), "run");
  const double e_dx = rel_err(ldx, dx), e_dw = rel_err(ldw, dw), e_db = rel_err(ldb, db);
  const double t_ember = time_us(ember_backward), t_lab = time_us(lab_backward),
               t_kernel = time_us(lab_kernel);
  const double bytes = 3.0 * rows * kN * 2;  // reads x and dy, writes dx
  std::printf(
      "rows %6lld, %d stages, %s rows%s: %3d registers, %d blocks/SM | ember %6.1f us %4.2f TB/s | lab %6.1f "
      "us "
      "%4.2f TB/s (its kernel alone %6.1f us) | rel err dx %.1e dw %.1e db %.1e %s\n",
      static_cast<long long>(rows), kStages, kChunked ? "contiguous" : "interleaved",
      kMath ? "" : ", no math (dx = x + dy)", attr.numRegs, per_sm, t_ember, bytes / t_ember / 1e6, t_lab,
      bytes / t_lab / 1e6, t_kernel, e_dx, e_dw, e_db,
      !kMath                                      ? "(not checked)"
      : e_dx < 1e-2 && e_dw < 1e-2 && e_db < 1e-2 ? "ok"
                                                  : "MISMATCH");
}

}  // namespace

int main(int argc, char** argv) {
  if (!cuda::is_available()) {
    std::printf("layer_norm_backward_lab: no CUDA device\n");
    return 1;
  }
  std::vector<int64_t> sizes = {4096, 32768};
  if (argc > 1) sizes.clear();
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  for (int64_t rows : sizes) {
    run<2, 1>(rows);
    run<3, 1>(rows);
    run<2, 1, false, false>(rows);
    run<2, 1, true>(rows);
    run<2, 1, true, false>(rows);
  }
  return 0;
}
