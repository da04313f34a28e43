#pragma once

// scaled_dot_product_attention, as torch.nn.functional's.

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
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

// q, k, v, mask and out have the same batch dims (q, k, v, mask possibly expanded, stride 0);
// q, k and v have unit stride in the last dim; out is contiguous. mask is undefined, bool, or in
// the compute dtype (float64 for float64 inputs, else float32). Dropout draws from `rng`.
using SdpaFn = void (*)(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& mask, bool is_causal, double scale, double dropout_p,
                        PhiloxState rng);
extern DispatchStub<SdpaFn> sdpa_stub;

}  // namespace ember
