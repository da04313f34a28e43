// CUDA kernels of native_dropout (and gelu_dropout, GELU before the mask) and their backwards. The forward
// draws the mask (ops::DropoutMaskDraw's 16-bit Philox numbers, core/ops/dropout_functors.h) and writes it
// with the output in one pass: each thread step takes 8 elements (16-byte loads: one for 2-byte floats,
// two for float, four for double), their Philox block and, for gelu_dropout, one byte of the packed mask.
// gelu_dropout's backward is the same kernel over (grad, x) with the mask read from those bits (or,
// where the linear before it wants its bias gradient, a kernel over tiles of rows that also sums the
// columns); native_dropout's is the generic elementwise launcher over (mask, grad). For f16 and bf16,
// GELU and its derivative are gelu_reduced_precision.cuh's (as the gelu op's kernels): fewer
// instructions than erff's, in kernels bound by instructions (the forward's are mostly Philox's).
#include <type_traits>
#include <utility>

#include "ember/core/factories.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_functors.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/gelu_reduced_precision.cuh"
#include "ember/cuda/layer_norm_util.cuh"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kDropoutBlock = 256;
constexpr int kStep = 8;  // elements per thread step: one byte of packed mask
static_assert(kStep % ops::kDropoutMaskBlock == 0);

// out = f(keep, in...) over inputs of out's layout, keep read from src.bits (kReadBits) or drawn
// from src.rng; a drawn mask is written as bools (`mask`) and/or packed bits (`bits`) unless null.
// `vectorized`: every pointer is aligned for 16-byte accesses (else one element at a time).
template <bool kReadBits, class T, class F, class... In>
__global__ void __launch_bounds__(kDropoutBlock)
    masked_map_kernel(T* out, bool* mask, uint8_t* bits, int64_t n, ops::DropoutKeepSource src, F f,
                      bool vectorized, const In*... in) {
  const ops::DropoutMaskDraw draw(src.rng.resolved(), src.p);
  constexpr int kVec = 16 / sizeof(T);  // 8 (f16, bf16), 4 (f32), 2 (f64)
  constexpr int kLoads = kStep / kVec;
  constexpr int kBlock = ops::kDropoutMaskBlock;
  const int64_t groups = (n + kStep - 1) / kStep, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step) {
    const int64_t first = g * kStep;
    unsigned keep;  // bit j: element first + j is kept
    if constexpr (kReadBits) {
      keep = src.bits[g];
    } else {
      keep = 0;
#pragma unroll
      for (int b = 0; b < kStep / kBlock; ++b)
        keep |= draw.block_bits(static_cast<uint64_t>(first / kBlock + b)) << (kBlock * b);
    }
    auto kept = [&](int j) { return keep >> j & 1u ? Acc<T>(1) : Acc<T>(0); };
    if (vectorized && first + kStep <= n) {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const Vec<T, kVec> v[] = {reinterpret_cast<const Vec<T, kVec>*>(in)[g * kLoads + l]...};
        Vec<T, kVec> o;
#pragma unroll
        for (int j = 0; j < kVec; ++j) o.v[j] = [&]<size_t... I>(std::index_sequence<I...>) {
            return from_acc<T>(f(kept(l * kVec + j), to_acc(v[I].v[j])...));
          }
        (std::index_sequence_for<In...>{});
        reinterpret_cast<Vec<T, kVec>*>(out)[g * kLoads + l] = o;
      }
      if (mask) {
        Vec<bool, kStep> m;
#pragma unroll
        for (int j = 0; j < kStep; ++j) m.v[j] = keep >> j & 1u;
        *reinterpret_cast<Vec<bool, kStep>*>(mask + first) = m;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kStep; ++j)  // unrolled: keep stays in registers
        if (first + j < n) {
          out[first + j] = from_acc<T>(f(kept(j), to_acc(in[first + j])...));
          if (mask) mask[first + j] = keep >> j & 1u;
        }
    }
    if (!kReadBits && bits) {
      const int64_t left = n - first;  // the bits of elements past n are 0
      bits[g] = static_cast<uint8_t>(left >= kStep ? keep : keep & ((1u << left) - 1u));
    }
  }
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// gelu_dropout's backward over rows of N (a multiple of kStep; every pointer 16-byte aligned) that
// also sums grad_input's columns as stored, for the bias gradient of the linear before it. Thread
// (c, y) of a block takes the kStep columns from kStep (kSumGroups blockIdx.x + c) on in rows y,
// y + kSumRowThreads, ... of the block's slice of rows (blockIdx.y); the row threads' sums meet in
// shared memory in a fixed order, and partial [gridDim.y, N] gets each slice's.
constexpr int kSumGroups = 32, kSumRowThreads = 8;
static_assert(kSumRowThreads == kStep);  // the block's threads then add up one column each

template <class T, class F>
__global__ void __launch_bounds__(kSumGroups* kSumRowThreads)
    gelu_backward_sums_kernel(T* out, Acc<T>* partial, int64_t rows, int64_t N, int64_t slice_rows,
                              const uint8_t* bits, F f, const T* grad, const T* x) {
  using A = Acc<T>;
  constexpr int kVec = 16 / sizeof(T), kLoads = kStep / kVec;
  __shared__ A shared[kSumRowThreads][kSumGroups * kStep];
  const int64_t groups = N / kStep, group = static_cast<int64_t>(blockIdx.x) * kSumGroups + threadIdx.x;
  A sum[kStep] = {};
  if (group < groups) {
    const int64_t end = min(rows, (blockIdx.y + 1) * slice_rows);
    for (int64_t r = blockIdx.y * slice_rows + threadIdx.y; r < end; r += kSumRowThreads) {
      const int64_t i = r * groups + group;  // the step's index in the flat tensor
      const uint8_t byte = bits[i];
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const Vec<T, kVec> gv = reinterpret_cast<const Vec<T, kVec>*>(grad)[i * kLoads + l];
        const Vec<T, kVec> xv = reinterpret_cast<const Vec<T, kVec>*>(x)[i * kLoads + l];
        Vec<T, kVec> o;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const int e = l * kVec + j;
          o.v[j] = from_acc<T>(f(static_cast<A>((byte >> e) & 1), to_acc(gv.v[j]), to_acc(xv.v[j])));
          sum[e] += to_acc(o.v[j]);
        }
        reinterpret_cast<Vec<T, kVec>*>(out)[i * kLoads + l] = o;
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kStep; ++e) shared[threadIdx.y][threadIdx.x * kStep + e] = sum[e];
  __syncthreads();
  const int t = static_cast<int>(threadIdx.y) * kSumGroups + static_cast<int>(threadIdx.x);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kSumGroups * kStep + t;
  if (col >= N) return;
  A total = A(0);
  for (int y = 0; y < kSumRowThreads; ++y) total += shared[y][t];
  partial[blockIdx.y * N + col] = total;
}

// masked_map_kernel over n = out.numel() elements.
template <class T, class F, class... In>
void launch_masked_map(const Tensor& out, const Tensor& mask, const Tensor& bits, ops::DropoutKeepSource src,
                       F f, const In&... in) {
  const bool vectorized = aligned(out.data_ptr(), 16) &&
                          (!mask.defined() || aligned(mask.data_ptr(), kStep)) &&
                          (aligned(in.data_ptr(), 16) && ...);
  const int64_t n = out.numel();
  auto launch = [&](auto kernel) {
    kernel<<<grid_for(ceil_div<int64_t>(n, kStep), kDropoutBlock), kDropoutBlock, 0, current_stream()>>>(
        static_cast<T*>(out.data_ptr()), mask.defined() ? mask.data_ptr<bool>() : nullptr,
        bits.defined() ? static_cast<uint8_t*>(bits.data_ptr()) : nullptr, n, src, f, vectorized,
        static_cast<const T*>(in.data_ptr())...);
    EMBER_CUDA_LAUNCH_CHECK();
  };
  if (src.bits)
    launch(masked_map_kernel<true, T, F, std::conditional_t<true, T, In>...>);  // each input is a T
  else
    launch(masked_map_kernel<false, T, F, std::conditional_t<true, T, In>...>);
}

void native_dropout_cuda(const Tensor& out, const Tensor& mask, const Tensor& bits, const Tensor& x, double p,
                         PhiloxState rng, bool gelu) {
  visit_float_dtype(gelu ? "gelu_dropout" : "native_dropout", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto scale = static_cast<Acc<T>>(ops::dropout_scale(p));
    const ops::DropoutKeepSource src{rng, p, nullptr};
    using Gelu = std::conditional_t<sizeof(T) == 2, ops::GeluMaskedScale<float, GeluReducedPrecision>,
                                    ops::GeluMaskedScale<Acc<T>>>;
    if (gelu)
      launch_masked_map<T>(out, mask, bits, src, Gelu{scale}, x);
    else
      launch_masked_map<T>(out, mask, bits, src, ops::MaskedScale<Acc<T>>{scale}, x);
  });
}

void native_dropout_backward_cuda(const Tensor& grad_input, const Tensor& grad_output, const Tensor& mask,
                                  double scale) {
  ElementwisePlan plan({grad_input, mask, grad_output});
  auto launch = [&](auto tag) {
    using C = decltype(tag);
    gpu_kernel<C, 2, BoolThenStorage>(plan, ops::MaskedScale<C>{static_cast<C>(scale)});
  };
  if (grad_input.dtype() == kFloat64) {
    launch(double{});
  } else {
    launch(float{});
  }
}

void gelu_dropout_backward_cuda(const Tensor& grad_input, const Tensor& sums, const Tensor& grad_output,
                                const Tensor& x, const Tensor& bits, double p) {
  visit_float_dtype("gelu_dropout_backward", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    using F =
        std::conditional_t<sizeof(T) == 2, ops::GeluMaskedScaleBackward<float, GeluBackwardReducedPrecision>,
                           ops::GeluMaskedScaleBackward<A>>;
    const F f{static_cast<A>(ops::dropout_scale(p))};
    const int64_t N = x.dim() > 0 ? x.size(-1) : 1, rows = x.numel() / N;
    if (sums.defined() && N % kStep == 0 && aligned(grad_input.data_ptr(), 16) &&
        aligned(grad_output.data_ptr(), 16) && aligned(x.data_ptr(), 16)) {
      const auto kernel = gelu_backward_sums_kernel<T, F>;
      const auto tiles = static_cast<unsigned>(ceil_div<int64_t>(N / kStep, kSumGroups));
      // About the blocks that fit on the GPU at once, each row thread with two rows or more.
      int64_t slices = std::clamp<int64_t>(
          ceil_div<int64_t>(
              resident_blocks(reinterpret_cast<const void*>(kernel), kSumGroups * kSumRowThreads), tiles),
          1, ceil_div<int64_t>(rows, 2 * kSumRowThreads));
      const int64_t slice_rows = ceil_div(rows, slices);
      slices = ceil_div(rows, slice_rows);
      Tensor partial = empty({slices, 1, N}, sums.options());
      const cudaStream_t stream = current_stream();
      kernel<<<dim3(tiles, static_cast<unsigned>(slices)), dim3(kSumGroups, kSumRowThreads), 0, stream>>>(
          static_cast<T*>(grad_input.data_ptr()), static_cast<A*>(partial.data_ptr()), rows, N, slice_rows,
          bits.data_ptr<uint8_t>(), f, static_cast<const T*>(grad_output.data_ptr()),
          static_cast<const T*>(x.data_ptr()));
      EMBER_CUDA_LAUNCH_CHECK();
      return launch_column_sums<A, A>({sums}, partial, slices, N, stream);
    }
    launch_masked_map<T>(grad_input, Tensor(), Tensor(),
                         ops::DropoutKeepSource{{}, p, bits.data_ptr<uint8_t>()}, f, grad_output, x);
    if (sums.defined()) sums.copy_(grad_input.view({rows, N}).sum({0}, false, sums.dtype()));
  });
}

KernelRegistrar<NativeDropoutFn> reg_forward(native_dropout_stub, kCUDA, &native_dropout_cuda);
KernelRegistrar<NativeDropoutBackwardFn> reg_backward(native_dropout_backward_stub, kCUDA,
                                                      &native_dropout_backward_cuda);
KernelRegistrar<GeluDropoutBackwardFn> reg_gelu_backward(gelu_dropout_backward_stub, kCUDA,
                                                         &gelu_dropout_backward_cuda);

}  // namespace
}  // namespace ember::cuda
