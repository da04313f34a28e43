#include "ember/nn/attention.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/ops/attention.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/softmax.h"
#include "ember/nn/functional.h"
#include "ember/nn/init.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {
namespace {

constexpr const char* kLayer = "MultiheadAttention";

// A mask as scores to add: bool true (not allowed) becomes -inf.
Tensor additive_mask(const Tensor& mask, ScalarType dtype, const char* what) {
  EMBER_CHECK(mask.dtype() == kBool || mask.is_floating_point(), kLayer, ": expected ", what,
              " of dtype bool or floating point, got ", mask.dtype());
  if (mask.dtype() != kBool) return mask.to(dtype);
  return zeros(mask.sizes(), TensorOptions(dtype).device(mask.device())).masked_fill(mask, -INFINITY);
}

void check_features(const Tensor& t, const char* what, int64_t embed_dim) {
  EMBER_CHECK(t.size(-1) == embed_dim, kLayer, ": ", what, " has ", t.size(-1),
              " features, expected embed_dim ", embed_dim, " (", what, " ", t.sizes(), ")");
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options_)
    : Module("MultiheadAttention"), options(options_) {
  int64_t E = options.embed_dim(), H = options.num_heads();
  EMBER_CHECK(E > 0 && H > 0 && E % H == 0, kLayer, ": embed_dim (", E, ") must be divisible by num_heads (",
              H, "), both positive");
  EMBER_CHECK(options.dropout() >= 0 && options.dropout() <= 1, kLayer,
              ": dropout probability has to be between 0 and 1, got ", options.dropout());
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * E, E}));
  in_proj_bias =
      register_parameter("in_proj_bias", options.bias() ? empty({3 * E}) : Tensor(), options.bias());
  out_proj = register_module("out_proj", Linear(LinearOptions(E, E).bias(options.bias())));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key,
                                                           const Tensor& value,
                                                           const Tensor& key_padding_mask, bool need_weights,
                                                           const Tensor& attn_mask, bool average_attn_weights,
                                                           bool is_causal) {
  int64_t E = options.embed_dim(), H = options.num_heads(), D = E / H;
  EMBER_CHECK(query.dim() == 2 || query.dim() == 3, kLayer,
              ": expected query to be unbatched 2D or batched 3D, got query ", query.sizes());
  bool batched = query.dim() == 3;
  EMBER_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), kLayer, ": for ", query.dim(),
              "D query, expected ", query.dim(), "D key and value, got key ", key.sizes(), " and value ",
              value.sizes());
  EMBER_CHECK(key.sizes().equals(value.sizes()), kLayer, ": key ", key.sizes(), " does not match value ",
              value.sizes());
  check_features(query, "query", E);
  check_features(key, "key", E);
  for (const Tensor* t : {&query, &key, &value}) detail::check_like_param(kLayer, *t, in_proj_weight);

  // Work batch-major: [N, L, E].
  auto batch_major = [&](const Tensor& t) {
    return !batched ? t.unsqueeze(0) : options.batch_first() ? t : t.transpose(0, 1);
  };
  Tensor q = batch_major(query), k = batch_major(key), v = batch_major(value);
  int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  EMBER_CHECK(k.size(0) == N, kLayer, ": query has batch size ", N, " but key and value ", k.size(0),
              " (query ", query.sizes(), ", key ", key.sizes(), ")");

  // One additive mask broadcastable to the scores [N, H, L, S], or none.
  ScalarType dt = query.dtype();
  Tensor mask;
  if (attn_mask.defined()) {
    Tensor m = additive_mask(attn_mask, dt, "attn_mask");
    if (m.dim() == 2) {
      EMBER_CHECK(m.sizes().equals({L, S}), kLayer, ": the 2D attn_mask is ", m.sizes(), ", but should be [",
                  L, ", ", S, "]");
      mask = m.view({1, 1, L, S});
    } else {
      EMBER_CHECK(m.dim() == 3, kLayer, ": attn_mask must be 2D or 3D, got ", m.sizes());
      EMBER_CHECK(m.sizes().equals({N * H, L, S}), kLayer, ": the 3D attn_mask is ", m.sizes(),
                  ", but should be [", N * H, ", ", L, ", ", S, "] (batch size times num_heads, L, S)");
      mask = m.view({N, H, L, S});
    }
  } else if (is_causal && (key_padding_mask.defined() || need_weights)) {
    mask = full({L, S}, -INFINITY, TensorOptions(dt).device(query.device())).triu(1).view({1, 1, L, S});
  }
  bool causal = is_causal && !mask.defined();  // left to scaled_dot_product_attention
  if (key_padding_mask.defined()) {
    DimVector expected = batched ? DimVector{N, S} : DimVector{S};
    EMBER_CHECK(key_padding_mask.sizes().equals(expected), kLayer, ": expected key_padding_mask of shape ",
                IntArrayRef(expected), ", got ", key_padding_mask.sizes());
    Tensor m = additive_mask(key_padding_mask, dt, "key_padding_mask").view({N, 1, 1, S});
    mask = mask.defined() ? mask + m : m;
  }

  // Projections, split into heads: [N, H, len, D].
  Tensor qp, kp, vp;
  if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = functional::linear(q, in_proj_weight, in_proj_bias).chunk(3, -1);
    qp = qkv[0], kp = qkv[1], vp = qkv[2];
  } else {
    auto project = [&](const Tensor& x, int64_t i) {
      Tensor b = in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor();
      return functional::linear(x, in_proj_weight.narrow(0, i * E, E), b);
    };
    qp = project(q, 0), kp = project(k, 1), vp = project(v, 2);
  }
  auto heads = [&](const Tensor& x, int64_t len) { return x.reshape({N, len, H, D}).transpose(1, 2); };
  Tensor qh = heads(qp, L), kh = heads(kp, S), vh = heads(vp, S);

  double p = is_training() ? options.dropout() : 0.0;
  Tensor out, weights;
  if (need_weights) {
    // The weights themselves are wanted: the explicit softmax(q k^T / sqrt(D) + mask).
    Tensor scores = (qh * (1 / std::sqrt(static_cast<double>(D)))).matmul(kh.mT());
    if (mask.defined()) scores = scores + mask;
    Tensor attn = softmax(scores, -1);
    if (p > 0) attn = dropout(attn, p);
    out = attn.matmul(vh);
    weights = average_attn_weights ? attn.mean({1}) : attn;
    if (!batched) weights = weights.squeeze(0);
  } else {
    out = scaled_dot_product_attention(qh, kh, vh, mask, p, causal);
  }
  out = out_proj(out.transpose(1, 2).reshape({N, L, E}));
  out = !batched ? out.squeeze(0) : options.batch_first() ? out : out.transpose(0, 1);
  return {out, weights};
}

}  // namespace ember::nn
