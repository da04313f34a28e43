// sdpa_fused_stub's CUDA kernel (core/ops/attention.h): ember's own for short sequences where it
// applies (attention_short.h: BERT's s128 attention, forward and backward, in two kernels), else
// cuDNN's (attention_cudnn.h). Each returns its backward with its forward's result.
#include "ember/core/ops/attention.h"
#include "ember/cuda/attention_cudnn.h"
#include "ember/cuda/attention_short.h"

namespace ember::cuda {
namespace {

std::optional<SdpaFused> sdpa_fused_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& mask, bool is_causal, double scale, double dropout_p,
                                         PhiloxState rng, bool training) {
  if (auto f = short_attention_forward(q, k, v, mask, is_causal, scale, dropout_p, rng, training)) return f;
  return cudnn_attention_forward(q, k, v, mask, is_causal, scale, dropout_p, rng, training);
}

KernelRegistrar<SdpaFusedFn> reg(sdpa_fused_stub, kCUDA, &sdpa_fused_cuda);

}  // namespace
}  // namespace ember::cuda
