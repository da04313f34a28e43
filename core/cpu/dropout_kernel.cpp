// CPU kernels of native_dropout (and gelu_dropout) and their backwards: the mask and the output in one pass
// over x, in chunks converted to the compute type (float for f16/bf16/f32, double); gelu_dropout's
// backward reads the mask from the bits its forward packed.
#include <utility>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_functors.h"

namespace ember::cpu {
namespace {

// A multiple of ops::kDropoutMaskBlock and of 8: a chunk starts on a Philox block and a byte of bits.
constexpr int64_t kChunk = 256;
static_assert(kChunk % ops::kDropoutMaskBlock == 0 && kChunk % 8 == 0);

// out = f(keep, in...) over the inputs (of out's shape and strides) in chunks, each with its mask
// taken first (and written into `keep` and/or packed into `bits` when they are not null).
template <class C, class F, class... In>
void masked_map(const Tensor& out, bool* keep, uint8_t* bits, ops::DropoutKeepSource src, F f, const In&... in) {
  const int64_t n = out.numel();
  const ops::DropoutMaskDraw draw(src.rng, src.p);
  parallel_for(0, (n + kChunk - 1) / kChunk, 16, [&](int64_t cb, int64_t ce) {
    C in_buf[sizeof...(In)][kChunk], out_buf[kChunk];
    bool keep_buf[kChunk];
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
      bool* k = keep ? keep + begin : keep_buf;
      constexpr int64_t kBlock = ops::kDropoutMaskBlock;
      if (src.bits) {
        for (int64_t i = 0; i < len; ++i) k[i] = (src.bits[(begin + i) / 8] >> ((begin + i) % 8)) & 1;
      } else {
        for (int64_t i = 0; i < len; i += kBlock)
          draw.block(static_cast<uint64_t>((begin + i) / kBlock), 0,
                     static_cast<int>(std::min(kBlock, len - i)), k + i);
      }
      if (bits) {
        for (int64_t i = 0; i < len; i += 8) {
          uint8_t byte = 0;
          for (int64_t j = 0; j < 8 && i + j < len; ++j) byte |= static_cast<uint8_t>(k[i + j]) << j;
          bits[(begin + i) / 8] = byte;
        }
      }
      size_t slot = 0;
      const C* v[] = {load_compute<C>(byte_ptr(in, begin), in.dtype(), len, in_buf[slot++])...};
      C* o = out_compute<C>(byte_ptr(out, begin), out.dtype(), out_buf);
      for (int64_t i = 0; i < len; ++i) o[i] = [&]<size_t... I>(std::index_sequence<I...>) {
          return f(static_cast<C>(k[i]), v[I][i]...);
        }
      (std::index_sequence_for<In...>{});
      store_compute<C>(o, byte_ptr(out, begin), out.dtype(), len);
    }
  });
}

void native_dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& bits, const Tensor& x, double p,
                           PhiloxState rng, bool gelu) {
  bool* keep = mask.defined() ? mask.data_ptr<bool>() : nullptr;
  uint8_t* packed = bits.defined() ? bits.data_ptr<uint8_t>() : nullptr;
  visit_float_compute(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const auto scale = static_cast<C>(ops::dropout_scale(p));
    const ops::DropoutKeepSource src{rng, p, nullptr};
    if (gelu)
      masked_map<C>(out, keep, packed, src, ops::GeluMaskedScale<C>{scale}, x);
    else
      masked_map<C>(out, keep, packed, src, ops::MaskedScale<C>{scale}, x);
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

void gelu_dropout_backward_kernel(const Tensor& grad_input, const Tensor& sums, const Tensor& grad_output,
                                  const Tensor& x, const Tensor& bits, double p) {
  visit_float_compute(grad_input.dtype(), [&](auto tag) {
    using C = decltype(tag);
    masked_map<C>(grad_input, nullptr, nullptr, ops::DropoutKeepSource{{}, p, bits.data_ptr<uint8_t>()},
                  ops::GeluMaskedScaleBackward<C>{static_cast<C>(ops::dropout_scale(p))}, grad_output, x);
  });
  if (sums.defined()) sums.copy_(grad_input.view({-1, grad_input.size(-1)}).sum({0}, false, sums.dtype()));
}

KernelRegistrar<NativeDropoutFn> reg_forward(native_dropout_stub, kCPU, &native_dropout_kernel);
KernelRegistrar<NativeDropoutBackwardFn> reg_backward(native_dropout_backward_stub, kCPU,
                                                      &native_dropout_backward_kernel);
KernelRegistrar<GeluDropoutBackwardFn> reg_gelu_backward(gelu_dropout_backward_stub, kCPU,
                                                         &gelu_dropout_backward_kernel);

}  // namespace
}  // namespace ember::cpu
