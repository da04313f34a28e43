#pragma once

// scaled_dot_product_attention, as torch.nn.functional's.

#include <array>
#include <optional>

#include "ember/core/dispatch.h"
#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// softmax(q k^T * scale + mask) v for q [..., L, E], k [..., S, E], v [..., S, Ev] whose batch
// dims broadcast; the result is [..., L, Ev] in q's dtype. attn_mask, broadcastable to
// [..., L, S], is bool (true = attend) or floating (added to the scores). is_causal lets query i
// attend keys j <= i and excludes attn_mask. scale defaults to 1 / sqrt(E). dropout_p drops
// attention weights (default generator). A query whose keys are all masked gets NaN, as in
// PyTorch's math backend.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

// q, k, v, mask and out have the same batch dims (q, k, v, mask possibly expanded, stride 0);
// q, k and v have unit stride in the last dim; out is contiguous. mask is undefined, bool, or in
// the compute dtype (float64 for float64 inputs, else float32). Dropout draws from `rng`.
using SdpaFn = void (*)(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& mask, bool is_causal, double scale, double dropout_p, PhiloxState rng);
extern DispatchStub<SdpaFn> sdpa_stub;

// A device's fused attention with a backward of its own (on CUDA: ember's kernel for short
// sequences, else cuDNN's flash attention), taken before sdpa_stub where it applies. The forward
// keeps what its backward needs: the softmax statistics and, with dropout, the draw's state on the
// device, from which the backward regenerates the mask.
struct SdpaFused;

// dq, dk, dv, laid out as q, k and v, from the output's gradient and the forward's SdpaFused.
using SdpaFusedBackwardFn = std::array<Tensor, 3> (*)(const Tensor& grad_out, const Tensor& q,
                                                      const Tensor& k, const Tensor& v, const SdpaFused& fwd,
                                                      bool is_causal, double scale, double dropout_p);

struct SdpaFused {
  Tensor out;    // [B, H, L, Ev]
  Tensor stats;  // float32 [B, H, L, 1]: the log-sum-exp of each row of scores
  Tensor bias;   // the mask as the kernel took it (undefined: none)
  Tensor rng;    // int64 [2] on the device: the dropout draw's seed and offset (undefined: none)
  const char* op;                // PyTorch's name for the kernel that ran: the autograd node's
  SdpaFusedBackwardFn backward;  // the backward of that kernel
};

// q, k, v are 4-D [B, H, L or S, E or Ev] with unit stride in the last dim; mask is undefined,
// bool or in float32, broadcastable to [B, H, L, S] and not requiring grad. Returns nothing, and
// does nothing, where no fused kernel applies. `training` asks for the statistics.
using SdpaFusedFn = std::optional<SdpaFused> (*)(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, bool is_causal, double scale,
                                                 double dropout_p, PhiloxState rng, bool training);
extern DispatchStub<SdpaFusedFn> sdpa_fused_stub;

}  // namespace ember
