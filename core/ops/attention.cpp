// Frontend of scaled_dot_product_attention: shape, dtype and mask checks, batch broadcasting as
// views, then the device's fused kernel.
#include "ember/core/ops/attention.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<SdpaFn> sdpa_stub("scaled_dot_product_attention");

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

const OpRegistrar registrar({{kOp, AutocastPolicy::LowerPrecision, true}});

DimVector batch_dims(const Tensor& t) { return DimVector(t.sizes().begin(), t.sizes().end() - 2); }

DimVector with_last2(const DimVector& batch, int64_t a, int64_t b) {
  DimVector s = batch;
  s.push_back(a);
  s.push_back(b);
  return s;
}

// t expanded to batch + its last two dims, with unit stride in the last dim.
Tensor expand_operand(const Tensor& t, const DimVector& batch) {
  Tensor c = t.stride(-1) == 1 || t.size(-1) <= 1 ? t : t.contiguous();
  return c.expand(with_last2(batch, t.size(-2), t.size(-1)));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const Tensor* qkv[] = {&query, &key, &value};
  const char* names[] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i) {
    nn_detail::check_floating(kOp, *qkv[i], names[i]);
    nn_detail::check_same_device(kOp, query, *qkv[i], names[i]);
    EMBER_CHECK(qkv[i]->dim() >= 2, kOp, ": expected ", names[i], " with at least 2 dims, got ",
                qkv[i]->sizes());
  }
  EMBER_CHECK(key.dtype() == query.dtype() && value.dtype() == query.dtype(), kOp,
              ": expected query, key and value to have the same dtype, got ", query.dtype(), ", ",
              key.dtype(), " and ", value.dtype());
  int64_t L = query.size(-2), E = query.size(-1), S = key.size(-2), Ev = value.size(-1);
  EMBER_CHECK(key.size(-1) == E && value.size(-2) == S, kOp,
              ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ",
              query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  DimVector batch = broadcast_shapes(kOp, broadcast_shapes(kOp, batch_dims(query), batch_dims(key)),
                                     batch_dims(value));
  EMBER_CHECK(dropout_p >= 0 && dropout_p <= 1, kOp, ": dropout_p must be in [0, 1], got ",
              dropout_p);

  ScalarType cd = nn_detail::compute_dtype(query.dtype());
  Tensor mask;
  if (attn_mask.defined()) {
    EMBER_CHECK(!is_causal, kOp, ": an explicit attn_mask must not be given with is_causal=true");
    nn_detail::check_same_device(kOp, query, attn_mask, "attn_mask");
    EMBER_CHECK(attn_mask.dtype() == kBool || attn_mask.is_floating_point(), kOp,
                ": expected attn_mask of dtype bool or floating point, got ", attn_mask.dtype());
    DimVector scores = with_last2(batch, L, S);
    EMBER_CHECK(nn_detail::broadcasts_to(attn_mask.sizes(), scores), kOp, ": attn_mask of shape ",
                attn_mask.sizes(), " does not broadcast to the scores' shape ",
                IntArrayRef(scores));
    // Cast before expanding, so a broadcast mask is never materialized.
    mask = (attn_mask.dtype() == kBool ? attn_mask : attn_mask.to(cd)).expand(scores);
  }

  Tensor out = empty(with_last2(batch, L, Ev), query.options());
  if (out.numel() == 0) return out;
  double s = scale.value_or(1 / std::sqrt(static_cast<double>(E)));
  PhiloxState rng =
      dropout_p > 0 ? default_generator(query.device().type).next() : PhiloxState{0, 0};
  sdpa_stub(query.device())(out, expand_operand(query, batch), expand_operand(key, batch),
                            expand_operand(value, batch), mask, is_causal, s, dropout_p, rng);
  return out;
}

}  // namespace ember
