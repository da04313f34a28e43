// dropout_add_layer_norm's frontend: checks, the kernels each way, and under create_graph the
// composite's formulas (native_dropout's mask drawn again, layer_norm's recorded backward).
#include "ember/core/ops/dropout_add_layer_norm.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_functors.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/ops/normalization.h"

namespace ember {

constinit DispatchStub<DropoutAddLayerNormFn> dropout_add_layer_norm_stub("dropout_add_layer_norm");
constinit DispatchStub<DropoutAddLayerNormBackwardFn> dropout_add_layer_norm_backward_stub(
    "dropout_add_layer_norm_backward");

namespace {

const OpRegistrar registrar({
    // Runs in x's dtype under autocast: its point is to hand a bf16 matmul its input.
    {"dropout_add_layer_norm", AutocastPolicy::None, true},
});

constexpr int64_t kFusedRowMax = 8192;

}  // namespace

Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& residual_in, const Tensor& weight,
                              const Tensor& bias, double p, double eps, bool training, Generator* gen) {
  detail::OpRange op_range("dropout_add_layer_norm", x, residual_in, weight, bias);
  const char* op = "dropout_add_layer_norm";
  nn_detail::check_floating(op, x, "input");
  nn_detail::check_floating(op, residual_in, "residual");
  nn_detail::check_same_device(op, x, residual_in, "residual");
  EMBER_CHECK(p >= 0 && p <= 1, op, ": probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK(x.dim() >= 1, op, ": expected an input with at least one dim, got a scalar");
  EMBER_CHECK(residual_in.sizes().equals(x.sizes()), op, ": residual of shape ", residual_in.sizes(),
              " does not match the input of shape ", x.sizes());
  const int64_t N = x.size(-1), M = N > 0 ? x.numel() / N : 0;
  const ScalarType cd = nn_detail::compute_dtype(x.dtype());
  const bool reduced = x.dtype() == kFloat16 || x.dtype() == kBFloat16;
  const Tensor residual = residual_in.dtype() == x.dtype() || (reduced && residual_in.dtype() == kFloat32)
                              ? residual_in
                              : residual_in.to(x.dtype());
  const ScalarType pd = nn_detail::layer_norm_param_dtype(weight, bias, x.dtype(), cd);
  nn_detail::check_param(op, weight, "weight", {N}, x);
  nn_detail::check_param(op, bias, "bias", {N}, x);
  if (N > kFusedRowMax)  // longer than the CUDA kernels keep in registers: the composite, in cd
    return layer_norm(residual.to(cd) + dropout(x.contiguous().to(cd), p, training, gen), {N}, weight, bias,
                      eps)
        .to(x.dtype());
  const bool dropout = training && p > 0;
  // One generator offset, only when it draws: as dropout, so RNG replay agrees with the composite.
  const PhiloxState rng = dropout ? (gen ? *gen : default_generator(x.device().type)).next() : PhiloxState{};
  Tensor out = empty(x.sizes(), x.options());
  Tensor mean = empty({M}, TensorOptions(cd).device(x.device()));
  Tensor rstd = empty({M}, TensorOptions(cd).device(x.device()));
  const bool grad = needs_grad({x, residual, weight, bias});
  Tensor bits =
      dropout && grad ? empty({M, (N + 7) / 8}, TensorOptions(kUInt8).device(x.device())) : Tensor();
  {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor w = nn_detail::param_as(op, weight, "weight", {N}, x, pd);
    Tensor b = nn_detail::param_as(op, bias, "bias", {N}, x, pd);
    if (M > 0)
      dropout_add_layer_norm_stub(x.device())(out.view({M, N}), mean, rstd, bits, x.contiguous().view({M, N}),
                                              residual.contiguous().view({M, N}), w, b, dropout, p, rng, eps);
  }
  if (!grad) return out;
  SavedTensor sx(x, false), sres(residual, false), sw(weight, false), smean(mean, false), srstd(rstd, false),
      sbits(bits, false);
  record(op, {x, residual, weight, bias}, {out},
         [sx, sres, sw, smean, srstd, sbits, M, N, cd, pd, eps, dropout, p,
          rng](const GradContext& g) -> std::vector<Tensor> {
           const Tensor x = g(sx), residual = g(sres), w = g(sw), gy = g.grad();
           const double scale = dropout ? ops::dropout_scale(p) : 1.0;
           const DimVector wsizes{N};
           if (needs_grad({gy, x, residual, w})) {  // create_graph: the composite's recorded formulas
             Tensor kept =
                 dropout ? native_dropout_backward(x, dropout_keep_mask(x.contiguous(), p, rng), scale) : x;
             Tensor s = residual.to(cd) + kept.to(cd);
             std::vector<Tensor> ln =
                 nn_detail::layer_norm_backward_graph(gy, s, g(smean), g(srstd), w, M, N, wsizes, cd, eps,
                                                      {g.needs(0) || g.needs(1), g.needs(2), g.needs(3)});
             const Tensor& ds = ln[0];
             Tensor dx, dres;
             if (g.needs(0))
               dx = dropout ? native_dropout_backward(ds, dropout_keep_mask(x.contiguous(), p, rng), scale)
                                  .to(x.dtype())
                            : ds.to(x.dtype());
             if (g.needs(1)) dres = ds.to(residual.dtype());
             return {dx, dres, ln[1], ln[2]};
           }
           Tensor dx = g.needs(0) ? empty(x.sizes(), x.options()) : Tensor();
           Tensor dres = g.needs(1) ? empty(residual.sizes(), residual.options()) : Tensor();
           TensorOptions po = TensorOptions(pd).device(x.device());
           Tensor dw = g.needs(2) ? empty(wsizes, po) : Tensor();
           Tensor db = g.needs(3) ? empty(wsizes, po) : Tensor();
           // The bias gradient of the linear before it, summed where dx is written (BackwardExtras).
           Tensor dx_sums = g.needs(0) && g.row_sums_wanted(0) && M > 0 ? empty(wsizes, po) : Tensor();
           if (M == 0) {
             for (Tensor* t : {&dw, &db})
               if (t->defined()) t->zero_();
           } else {
             auto rows = [&](const Tensor& t) { return t.defined() ? t.view({M, N}) : t; };
             dropout_add_layer_norm_backward_stub(x.device())(
                 rows(dx), rows(dres), dw, db, dx_sums, gy.to(x.dtype()).contiguous().view({M, N}),
                 x.contiguous().view({M, N}), residual.contiguous().view({M, N}), g(smean), g(srstd),
                 w.defined() ? w.to(pd).contiguous() : w, g(sbits), p);
           }
           if (dx_sums.defined()) g.set_row_sums(0, dx_sums);
           return {dx, dres, dw, db};
         });
  return out;
}

}  // namespace ember
