// CPU kernels of native_dropout (and gelu_dropout) and their backwards: the mask and the output in one pass
// over x, in chunks converted to the compute type (float for f16/bf16/f32, double).
#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_functors.h"

namespace ember::cpu {
namespace {

constexpr int64_t kChunk = 256;  // a multiple of ops::kDropoutMaskBlock: a chunk starts on a Philox block
static_assert(kChunk % ops::kDropoutMaskBlock == 0);

// out = f(keep, x) over x in chunks, each with its mask drawn first.
template <class C, class F>
void masked_forward(const Tensor& out, bool* keep, const Tensor& x, double p, PhiloxState rng, F f) {
  const int64_t n = x.numel();
  parallel_for(0, (n + kChunk - 1) / kChunk, 16, [&](int64_t cb, int64_t ce) {
    C in_buf[kChunk], out_buf[kChunk];
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
      bool* k = keep + begin;
      constexpr int64_t kBlock = ops::kDropoutMaskBlock;
      for (int64_t i = 0; i < len; i += kBlock)
        ops::dropout_mask_block(rng, p, static_cast<uint64_t>((begin + i) / kBlock), 0,
                                static_cast<int>(std::min(kBlock, len - i)), k + i);
      const C* in = load_compute<C>(byte_ptr(x, begin), x.dtype(), len, in_buf);
      C* o = out_compute<C>(byte_ptr(out, begin), out.dtype(), out_buf);
      for (int64_t i = 0; i < len; ++i) o[i] = f(static_cast<C>(k[i]), in[i]);
      store_compute<C>(o, byte_ptr(out, begin), out.dtype(), len);
    }
  });
}

void native_dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& x, double p, PhiloxState rng,
                           bool gelu) {
  visit_float_compute(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const auto scale = static_cast<C>(ops::dropout_scale(p));
    if (gelu)
      masked_forward<C>(out, mask.data_ptr<bool>(), x, p, rng, ops::GeluMaskedScale<C>{scale});
    else
      masked_forward<C>(out, mask.data_ptr<bool>(), x, p, rng, ops::MaskedScale<C>{scale});
  });
}

void native_dropout_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& mask,
                                    double scale) {
  ElementwiseIter it({grad_input, mask, grad_output});
  visit_float_compute(grad_input.dtype(), [&](auto tag) {
    using C = decltype(tag);
    cpu_kernel<C, C, 2>(it, ops::MaskedScale<C>{static_cast<C>(scale)});
  });
}

void gelu_dropout_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& mask,
                                  const Tensor& x, double scale) {
  ElementwiseIter it({grad_input, mask, grad_output, x});
  visit_float_compute(grad_input.dtype(), [&](auto tag) {
    using C = decltype(tag);
    cpu_kernel<C, C, 3>(it, ops::GeluMaskedScaleBackward<C>{static_cast<C>(scale)});
  });
}

KernelRegistrar<NativeDropoutFn> reg_forward(native_dropout_stub, kCPU, &native_dropout_kernel);
KernelRegistrar<NativeDropoutBackwardFn> reg_backward(native_dropout_backward_stub, kCPU,
                                                      &native_dropout_backward_kernel);
KernelRegistrar<GeluDropoutBackwardFn> reg_gelu_backward(gelu_dropout_backward_stub, kCPU,
                                                         &gelu_dropout_backward_kernel);

}  // namespace
}  // namespace ember::cpu
