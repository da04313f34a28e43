#pragma once

// The per-element math of dropout (core/ops/dropout.h), written once for the CPU kernels and the
// CUDA ones, so both devices keep the same elements and round the same way.

#include <cmath>

#include "ember/core/generator.h"
#include "ember/core/ops/elementwise_functors.h"
#include "ember/core/philox.h"

namespace ember::ops {

// What the kept elements are multiplied by; 0 for p == 1, where nothing is kept (no 1 / 0).
EMBER_HOST_DEVICE inline double dropout_scale(double p) { return p == 1 ? 0.0 : 1.0 / (1.0 - p); }

// Elements per Philox block of dropout's keep mask: 16 bits each, two a word.
inline constexpr int kDropoutMaskBlock = 8;

// Dropout's keep mask: element 8 b + j is kept when the 16-bit half j % 2 (the low one first) of
// word j / 2 of Philox block b is below ceil((1 - p) 2^16), a keep probability within 2^-16 of
// 1 - p (FlashAttention's dropout takes 8 bits). Half the Philox work per element of a float draw
// (bernoulli_'s 24 bits, four a block), in kernels that Philox's instructions bound: gelu_dropout's
// forward and dropout_add_layer_norm's. Made once per kernel: the threshold is double arithmetic.
struct DropoutMaskDraw {
  PhiloxState rng;
  uint32_t keep_below;  // in [0, 2^16]

  EMBER_HOST_DEVICE DropoutMaskDraw(PhiloxState rng_, double p)
      : rng(rng_),
        keep_below(p > 0 ? (p < 1 ? static_cast<uint32_t>(ceil((1.0 - p) * 0x1p16)) : 0u) : 1u << 16) {}

  // Whether element j of the block whose Philox words are r is kept.
  EMBER_HOST_DEVICE bool kept(const Philox4x32& r, int j) const {
    return ((r.v[j / 2] >> (16 * (j % 2))) & 0xffffu) < keep_below;
  }

  // Elements kDropoutMaskBlock * b + j, j in [first, last) of [0, kDropoutMaskBlock), into keep.
  EMBER_HOST_DEVICE void block(uint64_t b, int first, int last, bool* keep) const {
    const Philox4x32 r = philox_block(rng.seed, rng.offset, b);
    for (int j = first; j < last; ++j) keep[j - first] = kept(r, j);
  }

  // Block b's elements as bits, element j in bit j: for kernels that keep flags as bits.
  EMBER_HOST_DEVICE unsigned block_bits(uint64_t b) const {
    const Philox4x32 r = philox_block(rng.seed, rng.offset, b);
    unsigned bits = 0;
    for (int j = 0; j < kDropoutMaskBlock; ++j) bits |= static_cast<unsigned>(kept(r, j)) << j;
    return bits;
  }

  // Elements [first, first + n) of the flattened mask, whatever their Philox blocks: a row of a
  // fused op (dropout_add_layer_norm) that need not start on a block.
  EMBER_HOST_DEVICE void range(int64_t first, int64_t n, bool* keep) const {
    for (int64_t e = first; e < first + n;) {
      const int j = static_cast<int>(e % kDropoutMaskBlock);
      const int last =
          static_cast<int>(j + (first + n - e) < kDropoutMaskBlock ? j + (first + n - e) : kDropoutMaskBlock);
      block(static_cast<uint64_t>(e / kDropoutMaskBlock), j, last, keep + (e - first));
      e += last - j;
    }
  }
};

// Where a dropout kernel takes its keep mask from: drawn from `rng` with probability 1 - p, or read
// from packed bits (bit j of byte i is element 8 i + j) when `bits` is set.
struct DropoutKeepSource {
  PhiloxState rng;
  double p;
  const uint8_t* bits;
};

// keep ? x * scale : 0 in compute type C (float for f16/bf16/f32): the forward's output and the
// backward's gradient, so a dropped element is 0 even where x is inf or NaN.
template <class C>
struct MaskedScale {
  C scale;
  EMBER_HOST_DEVICE C operator()(C keep, C x) const { return keep != C(0) ? x * scale : C(0); }
};

// gelu_dropout's forward, keep ? gelu(x) * scale : 0, and its backward,
// keep ? gelu'(x) * g * scale : 0: GELU in the compute type, rounded once. G and GB compute GELU
// and g gelu'(x): the CUDA kernels of 2-byte floats take cuda/gelu_reduced_precision.cuh's, as
// the gelu op's do.
// GELU is computed for dropped elements too, then selected: on the GPU a select, where a branch
// around it costs more instructions than the GELU of the few dropped elements.
template <class C, class G = Gelu<C>>
struct GeluMaskedScale {
  C scale;
  EMBER_HOST_DEVICE C operator()(C keep, C x) const {
    const C y = G{}(x)*scale;
    return keep != C(0) ? y : C(0);
  }
};
template <class C, class GB = GeluBackward<C>>
struct GeluMaskedScaleBackward {
  C scale;
  EMBER_HOST_DEVICE C operator()(C keep, C g, C x) const {
    const C d = GB{}(g * scale, x);
    return keep != C(0) ? d : C(0);
  }
};

}  // namespace ember::ops
