#pragma once

// Fused attention for short sequences, forward and backward with dropout: one block per (batch,
// head) holds all of its queries, keys and values in shared memory, so its backward needs no
// atomics, no second pass and no conversion of an accumulated dq (cuDNN's backward at BERT's
// s128 runs three kernels). sdpa_fused_stub takes it before cuDNN's where it applies
// (cuda/attention_fused.cpp); its node is named as PyTorch's flash kernel's.

#include <array>
#include <optional>

#include "ember/core/ops/attention.h"
#include "ember/core/ops/dropout_functors.h"

namespace ember::cuda {

// The most queries, and keys, that the kernel takes; its head dim is 64.
inline constexpr int64_t kShortAttentionMaxLen = 128;
inline constexpr int64_t kShortAttentionHeadDim = 64;

// Its dropout, from `draw`'s state and threshold (ops::DropoutMaskDraw: 16 random bits a weight):
// weight (i, j) of batch-and-head entry bh, whose sequence has L queries, is kept when 16-bit half
// j % 2 of word (j % 32) / 8 of Philox block 16 (bh L + i) + 4 (j / 32) + (j % 8) / 2 is below
// the threshold. A block's eight weights are the ones that one thread holds in the kernel's
// registers (keys 2t, 2t + 1 of four tiles of 8), so each block is drawn once, in the forward and
// again in the backward.
EMBER_HOST_DEVICE inline bool short_attention_keeps(const ops::DropoutMaskDraw& draw, int64_t bh, int64_t L,
                                                    int64_t i, int64_t j) {
  const uint64_t block = static_cast<uint64_t>(16 * (bh * L + i) + 4 * (j / 32) + (j % 8) / 2);
  const Philox4x32 r = philox_block(draw.rng.seed, draw.rng.offset, block);
  return ((r.v[(j % 32) / 8] >> (16 * (j % 2))) & 0xffffu) < draw.keep_below;
}

// sdpa_fused_stub's operands and result (core/ops/attention.h). Applies to f16 and bf16 with
// flash_sdp_enabled(), no mask, a positive scale, q, k, v of the same batch and heads, head dims
// E = Ev = 64, 1 to 128 queries and keys, and 16-byte aligned rows, on GPUs of compute capability
// 8.0 or newer; returns nothing, and does nothing, elsewhere.
std::optional<SdpaFused> short_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, bool is_causal, double scale,
                                                 double dropout_p, PhiloxState rng, bool training);

}  // namespace ember::cuda
