#pragma once

// scaled_dot_product_attention through cuDNN's fused flash attention (the graph API's SDPA
// node, reached through the header-only cudnn_frontend that PyTorch also uses), forward and
// backward, with in-kernel dropout and an additive or boolean mask: what sdpa_fused_stub runs on
// CUDA where ember's short-sequence kernel does not apply (cuda/attention_fused.cpp).

#include <optional>
#include <string>

#include "ember/core/ops/attention.h"

namespace ember::cuda {

// Whether cuDNN's fused attention may be used, as torch.backends.cuda.enable_cudnn_sdp. On by
// default; off sends attention to the flash forward kernel and the math path.
void enable_cudnn_sdp(bool enabled);
bool cudnn_sdp_enabled();

// Whether this build has it: ember compiles it when cudnn_frontend's headers are found
// (scripts/fetch_cudnn_frontend.sh puts them where CMake looks).
bool cudnn_sdp_available();

// sdpa_fused_stub's operands and result (core/ops/attention.h); nothing where cuDNN's attention
// is off, not built, or declines the problem.
std::optional<SdpaFused> cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, bool is_causal, double scale,
                                                 double dropout_p, PhiloxState rng, bool training);

// Why cuDNN last declined an attention problem on this thread (empty when it never did).
std::string cudnn_sdp_last_rejection();

}  // namespace ember::cuda
