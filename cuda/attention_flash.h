#pragma once

// The fused (flash-attention style) forward of scaled_dot_product_attention on CUDA: one pass
// over the keys per block of queries with an online softmax, never materializing the scores.
// sdpa_stub's CUDA kernel (attention_math.cu) uses it where it applies, else the math path.

#include "ember/core/tensor.h"

namespace ember::cuda {

// Whether the fused kernel may be used, as torch.backends.cuda.enable_flash_sdp. On by default;
// off runs every attention through the math path (cuBLASLt products and a softmax kernel).
void enable_flash_sdp(bool enabled);
bool flash_sdp_enabled();

// out = softmax(q k^T * scale (+ causal limit)) v through the fused kernel, with sdpa_stub's
// operands (attention.h). Runs and returns true when the kernel applies: f16/bf16, head dim
// E = Ev of 64 or 128, no attn_mask, no dropout, at least one key, 16-byte aligned rows and
// flash_sdp_enabled(); else returns false and does nothing.
bool flash_attention_forward(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                             bool is_causal, double scale);

}  // namespace ember::cuda
