// Frontend of scaled_dot_product_attention: shape, dtype and mask checks, then the device's fused
// kernel with its own backward where it applies (on CUDA: ember's for short sequences, or cuDNN's),
// else batch broadcasting as views and the device's forward kernel. That kernel's backward
// recomputes the attention weights with ember ops (as PyTorch's math backend), so it differentiates
// again; with dropout under grad mode the whole op runs as that composite.
#include "ember/core/ops/attention.h"

#include <cmath>
#include <limits>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/ops/softmax.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<SdpaFn> sdpa_stub("scaled_dot_product_attention");
constinit DispatchStub<SdpaFusedFn> sdpa_fused_stub("_scaled_dot_product_fused_attention");

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

// softmax(q k^T * scale + mask) with ember ops; mask is undefined, bool (true = attend) or
// floating (added).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, bool is_causal, double scale) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Tensor s = q.matmul(k.mT()) * scale;
  if (is_causal) {
    TensorOptions o = TensorOptions(kInt64).device(q.device());
    int64_t L = q.size(-2), S = k.size(-2);
    s = s.masked_fill(arange(L, o).view({L, 1}) < arange(S, o).view({1, S}), -kInf);
  } else if (mask.defined()) {
    s = mask.dtype() == kBool ? s.masked_fill(!mask, -kInf) : s + mask;
  }
  return softmax(s, -1);
}

// The gradients of out = P v, P = attention_weights(q, k, mask), with ember ops (so they
// differentiate again): with dO the output's gradient, dV = P^T dO, dS = P * (dP - rowsum(dP * P))
// for dP = dO v^T (softmax's fused backward), dQ = dS k * scale, dK = dS^T q * scale, and dS for a
// floating mask; each summed back over broadcast batch dims.
std::vector<Tensor> composite_backward(const GradContext& g, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& m, bool is_causal, double scale,
                                       ScalarType cd) {
  Tensor qc = q.to(cd), kc = k.to(cd), vc = v.to(cd), go = g.grad().to(cd);
  Tensor p = attention_weights(qc, kc, m.defined() && m.dtype() != kBool ? m.to(cd) : m, is_causal, scale);
  Tensor ds = _softmax_backward_data(go.matmul(vc.mT()), p, -1, p.dtype());
  return {g.needs(0) ? sum_to(ds.matmul(kc) * scale, q.sizes()) : Tensor(),
          g.needs(1) ? sum_to(ds.mT().matmul(qc) * scale, k.sizes()) : Tensor(),
          g.needs(2) ? sum_to(p.mT().matmul(go), v.sizes()) : Tensor(),
          g.needs(3) ? sum_to(ds, m.sizes()) : Tensor()};
}

void record_attention(const Tensor& out, const Tensor& query, const Tensor& key, const Tensor& value,
                      const Tensor& attn_mask, bool is_causal, double scale, ScalarType cd) {
  SavedTensor sq(query, false), sk(key, false), sv(value, false), sm(attn_mask, false);
  record(kOp, {query, key, value, attn_mask}, {out},
         [sq, sk, sv, sm, is_causal, scale, cd](const GradContext& g) -> std::vector<Tensor> {
           return composite_backward(g, g(sq), g(sk), g(sv), g(sm), is_causal, scale, cd);
         });
}

// The fused kernel's backward, recorded under PyTorch's name for that kernel. It takes the forward's
// statistics and dropout state; a second derivative (grad mode on in the backward) runs the
// composite instead, which cannot replay the fused kernel's dropout.
void record_fused(const SdpaFused& f, const Tensor& query, const Tensor& key, const Tensor& value,
                  const Tensor& attn_mask, bool is_causal, double scale, double dropout_p, ScalarType cd) {
  SavedTensor sq(query, false), sk(key, false), sv(value, false), so(f.out, true), sm(attn_mask, false);
  const SdpaFused kept{Tensor(), f.stats, f.bias, f.rng, f.op, f.backward};
  record(f.op, {query, key, value, attn_mask}, {f.out},
         [=](const GradContext& g) -> std::vector<Tensor> {
           Tensor q = g(sq), k = g(sk), v = g(sv);
           if (GradMode::is_enabled()) {
             EMBER_CHECK(dropout_p == 0, kOp,
                         ": a second derivative of attention with dropout is not supported (the fused "
                         "kernel keeps no dropout mask)");
             return composite_backward(g, q, k, v, g(sm), is_causal, scale, cd);
           }
           SdpaFused fwd = kept;
           fwd.out = g(so);
           auto [dq, dk, dv] = fwd.backward(g.grad(), q, k, v, fwd, is_causal, scale, dropout_p);
           return {dq, dk, dv, Tensor()};
         });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  detail::OpRange op_range("scaled_dot_product_attention", query, key, value, attn_mask);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        kOp, [&](const auto&... t) { return scaled_dot_product_attention(t...); }, query, key, value,
        attn_mask, dropout_p, is_causal, scale);
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
              ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ", query.sizes(),
              ", ", key.sizes(), " and ", value.sizes());
  DimVector batch =
      broadcast_shapes(kOp, broadcast_shapes(kOp, batch_dims(query), batch_dims(key)), batch_dims(value));
  EMBER_CHECK(dropout_p >= 0 && dropout_p <= 1, kOp, ": dropout_p must be in [0, 1], got ", dropout_p);

  // The composite's dtype: on CUDA the inputs' own, as PyTorch's math backend (cuBLAS accumulates
  // in float32 and softmax computes in float32 inside, while half the bytes move); float32 for
  // half types on the CPU.
  ScalarType cd = query.is_cuda() ? query.dtype() : nn_detail::compute_dtype(query.dtype());
  Tensor mask, mask_c;  // the mask checked and cast; mask_c not yet expanded
  if (attn_mask.defined()) {
    EMBER_CHECK(!is_causal, kOp, ": an explicit attn_mask must not be given with is_causal=true");
    nn_detail::check_same_device(kOp, query, attn_mask, "attn_mask");
    EMBER_CHECK(attn_mask.dtype() == kBool || attn_mask.is_floating_point(), kOp,
                ": expected attn_mask of dtype bool or floating point, got ", attn_mask.dtype());
    DimVector scores = with_last2(batch, L, S);
    EMBER_CHECK(nn_detail::broadcasts_to(attn_mask.sizes(), scores), kOp, ": attn_mask of shape ",
                attn_mask.sizes(), " does not broadcast to the scores' shape ", IntArrayRef(scores));
    // Cast before expanding, so a broadcast mask is never materialized.
    // The fused kernels take a floating mask in float32 (float64 for float64 inputs).
    mask_c = attn_mask.dtype() == kBool ? attn_mask : attn_mask.to(nn_detail::compute_dtype(query.dtype()));
    mask = mask_c.expand(scores);
  }

  double s = scale.value_or(1 / std::sqrt(static_cast<double>(E)));
  bool grad = needs_grad({query, key, value, attn_mask});
  const DeviceType dev = query.device().type;
  PhiloxState rng = dropout_p > 0 ? default_generator(dev).next() : PhiloxState{0, 0};
  if (sdpa_fused_stub.has(dev) && query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
      !(attn_mask.defined() && attn_mask.requires_grad())) {
    std::optional<SdpaFused> f;
    {
      NoGradGuard no_grad;  // recorded below as one op
      f = sdpa_fused_stub(query.device())(query, key, value, mask_c, is_causal, s, dropout_p, rng, grad);
    }
    if (f) {
      if (grad) record_fused(*f, query, key, value, attn_mask, is_causal, s, dropout_p, cd);
      return f->out;
    }
  }
  if (grad && dropout_p > 0) {
    // The dropped weights must be kept for the backward: run the composite.
    Tensor m = attn_mask.defined() && attn_mask.dtype() != kBool ? attn_mask.to(cd) : attn_mask;
    Tensor p = attention_weights(query.to(cd), key.to(cd), m, is_causal, s);
    return dropout(p, dropout_p).matmul(value.to(cd)).to(query.dtype());
  }
  Tensor out = empty(with_last2(batch, L, Ev), query.options());
  if (out.numel() > 0) {
    NoGradGuard no_grad;  // recorded below as one op
    sdpa_stub(query.device())(out, expand_operand(query, batch), expand_operand(key, batch),
                              expand_operand(value, batch), mask, is_causal, s, dropout_p, rng);
  }
  if (grad) record_attention(out, query, key, value, attn_mask, is_causal, s, cd);
  return out;
}

}  // namespace ember
