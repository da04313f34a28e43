// CUDA kernels of native_dropout (and gelu_dropout, GELU before the mask) and their backwards. The forward
// draws the mask (the Philox numbers bernoulli_ draws, core/ops/dropout_functors.h) and writes it with the
// output in one pass: each thread step takes one 16-byte load of x and the Philox blocks of its elements
// (four elements a block: two blocks for 2-byte floats, one for float, half of one for double).
// gelu_dropout's backward is the same kernel over (grad, x), drawing the mask again; native_dropout's
// is the generic elementwise launcher over (mask, grad).
#include <utility>

#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_functors.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kDropoutBlock = 256;

// out = f(keep, in...) over inputs of out's layout, with the mask written unless null;
// `vectorized`: every pointer is aligned for kVec-wide accesses (else one element at a time).
template <class T, class F, class... In>
__global__ void __launch_bounds__(kDropoutBlock)
    masked_map_kernel(T* out, bool* mask, int64_t n, double p, PhiloxState state, F f, bool vectorized,
                      const In*... in) {
  const PhiloxState rng = state.resolved();
  constexpr int kVec = 16 / sizeof(T);  // 8 (f16, bf16), 4 (f32), 2 (f64)
  constexpr int kBlock = ops::kDropoutMaskBlock;
  static_assert(kVec % kBlock == 0 || kBlock % kVec == 0);
  const int64_t groups = (n + kVec - 1) / kVec, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step) {
    const int64_t first = g * kVec;
    Vec<bool, kVec> keep;
    if constexpr (kVec >= kBlock) {
#pragma unroll
      for (int b = 0; b < kVec / kBlock; ++b)
        ops::dropout_mask_block(rng, p, static_cast<uint64_t>(first / kBlock + b), 0, kBlock,
                                keep.v + kBlock * b);
    } else {
      const int j = static_cast<int>(first % kBlock);
      ops::dropout_mask_block(rng, p, static_cast<uint64_t>(first / kBlock), j, j + kVec, keep.v);
    }
    if (vectorized && first + kVec <= n) {
      const Vec<T, kVec> v[] = {reinterpret_cast<const Vec<T, kVec>*>(in)[g]...};
      Vec<T, kVec> o;
#pragma unroll
      for (int j = 0; j < kVec; ++j) o.v[j] = [&]<size_t... I>(std::index_sequence<I...>) {
          return from_acc<T>(f(static_cast<Acc<T>>(keep.v[j]), to_acc(v[I].v[j])...));
        }
      (std::index_sequence_for<In...>{});
      reinterpret_cast<Vec<T, kVec>*>(out)[g] = o;
      if (mask) reinterpret_cast<Vec<bool, kVec>*>(mask)[g] = keep;
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j)  // unrolled: keep stays in registers
        if (first + j < n) {
          out[first + j] = from_acc<T>(f(static_cast<Acc<T>>(keep.v[j]), to_acc(in[first + j])...));
          if (mask) mask[first + j] = keep.v[j];
        }
    }
  }
}

bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// masked_map_kernel over n = out.numel() elements.
template <class T, class F, class... In>
void launch_masked_map(const Tensor& out, const Tensor& mask, double p, PhiloxState rng, F f,
                       const In&... in) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vectorized = aligned(out.data_ptr(), 16) &&
                          (!mask.defined() || aligned(mask.data_ptr(), kVec)) &&
                          (aligned(in.data_ptr(), 16) && ...);
  const int64_t n = out.numel();
  masked_map_kernel<T>
      <<<grid_for(ceil_div<int64_t>(n, kVec), kDropoutBlock), kDropoutBlock, 0, current_stream()>>>(
          static_cast<T*>(out.data_ptr()), mask.defined() ? mask.data_ptr<bool>() : nullptr, n, p, rng, f,
          vectorized, static_cast<const T*>(in.data_ptr())...);
  EMBER_CUDA_LAUNCH_CHECK();
}

void native_dropout_cuda(const Tensor& out, const Tensor& mask, const Tensor& x, double p, PhiloxState rng,
                         bool gelu) {
  visit_float_dtype(gelu ? "gelu_dropout" : "native_dropout", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto scale = static_cast<Acc<T>>(ops::dropout_scale(p));
    if (gelu)
      launch_masked_map<T>(out, mask, p, rng, ops::GeluMaskedScale<Acc<T>>{scale}, x);
    else
      launch_masked_map<T>(out, mask, p, rng, ops::MaskedScale<Acc<T>>{scale}, x);
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

void gelu_dropout_backward_cuda(const Tensor& grad_input, const Tensor& grad_output, const Tensor& x,
                                double p, PhiloxState rng) {
  visit_float_dtype("gelu_dropout_backward", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_masked_map<T>(grad_input, Tensor(), p, rng,
                         ops::GeluMaskedScaleBackward<Acc<T>>{static_cast<Acc<T>>(ops::dropout_scale(p))},
                         grad_output, x);
  });
}

KernelRegistrar<NativeDropoutFn> reg_forward(native_dropout_stub, kCUDA, &native_dropout_cuda);
KernelRegistrar<NativeDropoutBackwardFn> reg_backward(native_dropout_backward_stub, kCUDA,
                                                      &native_dropout_backward_cuda);
KernelRegistrar<GeluDropoutBackwardFn> reg_gelu_backward(gelu_dropout_backward_stub, kCUDA,
                                                         &gelu_dropout_backward_cuda);

}  // namespace
}  // namespace ember::cuda
