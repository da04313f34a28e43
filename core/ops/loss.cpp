// Frontends of the losses: shape and dtype checks, the per-element kernels, then the reduction.
// Losses are computed in float32 (float64 for float64 inputs) and cast to the input's dtype.
#include "ember/core/ops/loss.h"

#include "ember/core/aligned_rows.h"
#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/ops/softmax.h"
#include "ember/core/shape.h"
#include "ember/core/type_promotion.h"

namespace ember {

constinit DispatchStub<LossSumFn> loss_sum_stub("loss_sum");
constinit DispatchStub<NllLossFn> nll_loss_stub("nll_loss");
constinit DispatchStub<SoftCrossEntropyFn> soft_cross_entropy_stub("soft_cross_entropy");
constinit DispatchStub<BceWithLogitsFn> bce_with_logits_stub("binary_cross_entropy_with_logits");
constinit DispatchStub<CrossEntropyForwardFn> cross_entropy_forward_stub("cross_entropy_forward");
constinit DispatchStub<CrossEntropyBackwardFn> cross_entropy_backward_stub("cross_entropy_backward");

namespace {

using nn_detail::check_floating;
using nn_detail::check_same_device;
using nn_detail::compute_dtype;

constexpr auto F32 = AutocastPolicy::Float32;
const OpRegistrar registrar({
    {"cross_entropy", F32, true},
    {"nll_loss", F32, true},
    {"mse_loss", F32, true},
    {"binary_cross_entropy_with_logits", F32, true},
});

Tensor loss_sum(const Tensor& l) {
  Tensor out = empty({}, l.options());
  loss_sum_stub(l.device())(out, l.contiguous());
  return out;
}

// `l` holds per-element losses in the compute dtype; the result is cast to `dt`. A mean over
// zero elements is 0 / 0 = NaN, as in PyTorch.
Tensor reduce(const Tensor& l, Reduction r, ScalarType dt) {
  if (r == Reduction::None) return l.to(dt);
  Tensor s = loss_sum(l);
  if (r == Reduction::Mean) s = s / static_cast<double>(l.numel());
  return s.to(dt);
}

// Loss weights get no gradient (as in PyTorch).
Tensor constant(const Tensor& t) { return t.defined() ? t.detach() : t; }

// The gradient reaching each of the `n` per-element losses from the gradient `g` of the
// reduced loss: g itself for 'none' (per element) and 'sum' (0-dim, broadcast), g / n for 'mean'.
Tensor element_grad(const Tensor& g, Reduction r, int64_t n) {
  return r == Reduction::Mean ? g / static_cast<double>(n) : g;
}

// The class-index losses: input [N, C, d...] (or [C]) with class dim 1 (or 0).
struct ClassShape {
  int64_t N, C, D;
  DimVector target_shape;  // the input's shape without the class dim
};

// x as [N, C, D] blocks, each contiguous and x.stride(0) apart: [N, C] logits with padded rows
// (a wide head's output, see aligned_rows.h) go in without a copy.
Tensor class_blocks(const Tensor& x, const ClassShape& cs) {
  if (x.dim() == 2 && x.stride(1) == 1 && x.stride(0) >= cs.C) return x.view({cs.N, cs.C, 1});
  return x.contiguous().view({cs.N, cs.C, cs.D});
}

ClassShape class_shape(const char* op, const Tensor& input) {
  EMBER_CHECK(input.dim() >= 1, op,
              ": expected an input of shape (C), (N, C) or (N, C, d1, ...), got a 0-dim tensor");
  IntArrayRef s = input.sizes();
  if (input.dim() == 1) return {1, s[0], 1, {}};
  DimVector ts(s.begin(), s.end());
  ts.erase(1);
  return {s[0], s[1], numel_of(IntArrayRef(s.data() + 2, s.size() - 2)), ts};
}

// An element gradient (per element of target_shape, or 0-dim) as [N, 1, D] against [N, C, D].
Tensor per_class(const Tensor& ge, Reduction r, const ClassShape& cs) {
  return r == Reduction::None ? ge.reshape({cs.N, 1, cs.D}) : ge;
}

// `or_probabilities`: the op also takes class probabilities (cross_entropy), for the message.
void check_class_target(const char* op, const Tensor& input, const Tensor& target, const ClassShape& cs,
                        bool or_probabilities) {
  check_same_device(op, input, target, "target");
  EMBER_CHECK(target.dtype() == kInt64, op, ": expected target of dtype int64 (class indices)",
              or_probabilities ? " or of the input's shape (class probabilities)" : "", ", got ",
              target.dtype(), " target of shape ", target.sizes(), " for input of shape ", input.sizes());
  EMBER_CHECK(target.sizes().equals(cs.target_shape), op, ": expected target of shape ",
              IntArrayRef(cs.target_shape), " for input of shape ", input.sizes(), ", got ", target.sizes());
}

// The op's output and, for the backward, the target weight of each position (0 where ignored)
// and, for a mean, their sum.
struct NllForward {
  Tensor out, total, total_sum;
};

// Per-position buffers [N, D] in the compute dtype for an NllLossFn or CrossEntropyForwardFn.
struct NllTerms {
  Tensor loss, total, smooth;
};

NllTerms nll_terms(const ClassShape& cs, double ls, TensorOptions o) {
  return {empty({cs.N, cs.D}, o), empty({cs.N, cs.D}, o), ls > 0 ? empty({cs.N, cs.D}, o) : Tensor()};
}

// The kernels' per-position terms reduced to the op's output in dtype `dt`, mixed with the
// smoothing term when label_smoothing > 0: ((1 - ls) * nll + ls / C * smooth), a mean dividing
// both by the summed target weights (PyTorch's cross_entropy_loss_label_smoothing).
NllForward nll_reduce(const NllTerms& k, Reduction r, double ls, const ClassShape& cs, ScalarType dt) {
  NoGradGuard no_grad;  // the callers record the op
  const double smooth_scale = cs.C > 0 ? ls / static_cast<double>(cs.C) : 0;
  Tensor out, total_sum;
  if (r == Reduction::None) {
    out = k.smooth.defined() ? k.loss * (1 - ls) + k.smooth * smooth_scale : k.loss;
    out = out.view(cs.target_shape).to(dt);
  } else {
    out = loss_sum(k.loss);
    if (k.smooth.defined()) out = out * (1 - ls) + loss_sum(k.smooth) * smooth_scale;
    if (r == Reduction::Mean) out = out / (total_sum = loss_sum(k.total));
    out = out.to(dt);
  }
  return {out, k.total, total_sum};
}

// The gradient reaching each position's loss from the gradient g of the op's output: [N, 1, D]
// for 'none', 0-dim otherwise.
Tensor position_grad(const Tensor& g, Reduction r, const Tensor& total_sum, const ClassShape& cs) {
  return per_class(r == Reduction::Mean ? g / total_sum : g, r, cs);
}

// d loss / d logp [N, C, D] from the position gradients ge: -ge[n, d] * ((1 - ls) * w[t] *
// [c == t] + ls / C * w[c]) where the target t is not ignored (total holds w[t], 0 where ignored).
// Linear in ge, constant in logp: differentiable again.
Tensor nll_backward(const Tensor& ge, const Tensor& target, const Tensor& total, const Tensor& weight,
                    int64_t ignore_index, double ls, const ClassShape& cs) {
  Tensor t = target.reshape({cs.N, 1, cs.D});
  Tensor valid = t != ignore_index;
  Tensor classes = arange(cs.C, TensorOptions(kInt64).device(t.device())).view({1, cs.C, 1});
  // The where on [N, 1, D] keeps a mean over no targets (ge = inf) from making NaNs.
  Tensor at_target = where(valid, ge * total.view({cs.N, 1, cs.D}) * (ls - 1), 0);
  Tensor d = where(t == classes, at_target, 0);
  if (ls > 0) {
    Tensor s = ge * (-ls / static_cast<double>(cs.C));
    d = d + where(valid, weight.defined() ? s * weight.view({1, cs.C, 1}) : s, 0);
  }
  return d;
}

// nll_loss on log-probabilities, recorded as `op` on logp.
Tensor nll(const char* op, const Tensor& logp, const Tensor& target, const Tensor& weight,
           int64_t ignore_index, Reduction r, const ClassShape& cs, ScalarType dt) {
  NllTerms k = nll_terms(cs, 0, logp.options());
  if (cs.N * cs.D > 0) {
    NoGradGuard no_grad;  // recorded below as one op
    nll_loss_stub(logp.device())(k.loss, k.total, k.smooth, logp.contiguous().view({cs.N, cs.C, cs.D}),
                                 target.contiguous().view({cs.N, cs.D}), weight, ignore_index, op);
  }
  NllForward f = nll_reduce(k, r, 0, cs, dt);
  if (needs_grad({logp})) {
    SavedTensor st(target, false);
    DimVector sizes(logp.sizes());
    // Not f itself: a node holding its own output would never be freed without a backward.
    record(op, {logp}, {f.out},
           [st, total = f.total, total_sum = f.total_sum, weight, ignore_index, r, cs,
            sizes](const GradContext& g) -> std::vector<Tensor> {
             Tensor ge = position_grad(g.grad(), r, total_sum, cs);
             return {nll_backward(ge, g(st), total, weight, ignore_index, 0, cs).reshape(sizes)};
           });
  }
  return f.out;
}

// cross_entropy with class targets, recorded as one op: one fused kernel reads the logits in
// their dtype and keeps only each position's logsumexp for the backward, another writes the
// first-order gradient.
Tensor class_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                           int64_t ignore_index, Reduction r, double ls, const ClassShape& cs,
                           int64_t class_dim, ScalarType loss_dtype) {
  const char* op = "cross_entropy";
  ScalarType cd = compute_dtype(input.dtype());
  const TensorOptions o = TensorOptions(cd).device(input.device());
  NllTerms k = nll_terms(cs, ls, o);
  Tensor lse = empty({cs.N, cs.D}, o);
  if (cs.N * cs.D > 0) {
    NoGradGuard no_grad;  // recorded below as one op
    cross_entropy_forward_stub(input.device())(k.loss, k.total, k.smooth, lse, class_blocks(input, cs),
                                               target.contiguous().view({cs.N, cs.D}), weight, ignore_index,
                                               op);
  }
  NllForward f = nll_reduce(k, r, ls, cs, loss_dtype);
  if (needs_grad({input})) {
    Tensor weight_sum;
    if (weight.defined() && ls > 0) weight_sum = weight.sum();
    SavedTensor sx(input, false), st(target, false);
    // Not f itself: a node holding its own output would never be freed without a backward.
    record(op, {input}, {f.out},
           [sx, st, lse, total = f.total, total_sum = f.total_sum, weight, weight_sum, ignore_index, r, ls,
            cs, class_dim, cd](const GradContext& g) -> std::vector<Tensor> {
             Tensor x = g(sx), t = g(st);
             Tensor ge = position_grad(g.grad(), r, total_sum, cs);
             if (needs_grad({ge, x})) {
               // create_graph: nll's formula through log_softmax recomputed from the input.
               Tensor d = nll_backward(ge, t, total, weight, ignore_index, ls, cs);
               return {_log_softmax_backward_data(d.reshape(x.sizes()), log_softmax(x, class_dim, cd),
                                                  class_dim, x.dtype())};
             }
             // [N, C] logits' gradient rows padded to 16 bytes where C is a wide odd width: the
             // head's backward products read them aligned.
             Tensor gx = x.dim() == 2 ? detail::empty_aligned_rows(cs.N, cs.C, x.options())
                                      : empty(x.sizes(), x.options());
             // The bias gradient of the linear before it (through the view to [N, C]), summed where
             // gx is written (BackwardExtras).
             Tensor sums = g.row_sums_wanted(0) && x.dim() == 2 && gx.numel() > 0
                               ? empty({cs.C}, TensorOptions(cd).device(x.device()))
                               : Tensor();
             if (gx.numel() > 0)
               cross_entropy_backward_stub(x.device())(
                   gx.view({cs.N, cs.C, cs.D}), sums, ge.to(cd).contiguous(), class_blocks(x, cs), lse,
                   t.contiguous().view({cs.N, cs.D}), weight, weight_sum, ignore_index, ls);
             if (sums.defined()) g.set_row_sums(0, sums);
             return {gx};
           });
  }
  return f.out;
}

}  // namespace

Reduction parse_reduction(const char* op, std::string_view reduction) {
  if (reduction == "mean") return Reduction::Mean;
  if (reduction == "sum") return Reduction::Sum;
  EMBER_CHECK(reduction == "none", op, ": reduction must be 'none', 'mean' or 'sum', got '", reduction, "'");
  return Reduction::None;
}

namespace {

// cross_entropy with the loss in `loss_dtype` for class targets (the input's dtype, or float32
// under autocast).
Tensor cross_entropy_as(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                        std::string_view reduction, double label_smoothing, ScalarType loss_dtype) {
  const char* op = "cross_entropy";
  check_floating(op, input, "input");
  Reduction r = parse_reduction(op, reduction);
  ClassShape cs = class_shape(op, input);
  EMBER_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op,
              ": label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  ScalarType cd = compute_dtype(input.dtype());
  Tensor w = nn_detail::param_as(op, constant(weight), "weight", {cs.C}, input, cd);
  int64_t class_dim = input.dim() == 1 ? 0 : 1;

  if (!target.sizes().equals(input.sizes())) {
    check_class_target(op, input, target, cs, true);
    return class_cross_entropy(input, target, w, ignore_index, r, label_smoothing, cs, class_dim, loss_dtype);
  }
  // Same shape as the input: class probabilities.
  check_same_device(op, input, target, "target");
  EMBER_CHECK(target.is_floating_point(), op,
              ": expected a floating point target of class probabilities (the input's shape ", input.sizes(),
              "), got ", target.dtype());
  EMBER_CHECK(ignore_index < 0, op, ": ignore_index is not supported for class-probability targets, got ",
              ignore_index);
  Tensor logp = log_softmax(input, class_dim, cd);
  Tensor probs = target.to(cd);
  Tensor out;
  {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor loss = empty({cs.N, cs.D}, logp.options());
    if (loss.numel() > 0 && cs.C > 0)
      soft_cross_entropy_stub(input.device())(loss, logp.view({cs.N, cs.C, cs.D}),
                                              probs.contiguous().view({cs.N, cs.C, cs.D}), w,
                                              label_smoothing);
    else
      loss.zero_();
    out = reduce(loss.view(cs.target_shape), r, input.dtype());
  }
  if (needs_grad({logp, probs})) {
    // loss = -sum_c logp * (probs * (1 - ls) + ls / C) * w[c], linear in each.
    SavedTensor sl(logp, false), sp(probs, false);
    DimVector sizes(input.sizes());
    double ls = label_smoothing;
    record(
        op, {logp, probs}, {out}, [sl, sp, w, r, ls, cs, sizes](const GradContext& g) -> std::vector<Tensor> {
          DimVector ncd{cs.N, cs.C, cs.D};
          Tensor ge = per_class(element_grad(g.grad(), r, cs.N * cs.D), r, cs);
          if (w.defined()) ge = ge * w.view({1, cs.C, 1});
          Tensor glogp, gprobs;
          if (g.needs(0))
            glogp = (-ge * (g(sp).reshape(ncd) * (1 - ls) + ls / static_cast<double>(cs.C))).reshape(sizes);
          if (g.needs(1)) gprobs = (ge * g(sl).reshape(ncd) * (ls - 1)).reshape(sizes);
          return {glogp, gprobs};
        });
  }
  return out;
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     std::string_view reduction, double label_smoothing) {
  detail::OpRange op_range("cross_entropy", input, target, weight);
  if (amp::detail::autocast_pending) {
    // Class targets: the fused kernels read reduced-precision logits and compute in float32, so
    // autocast's float32 copy of the logits (and of their gradient, 3 bytes a logit each way on a
    // 30522-word head) is skipped; the loss is float32 as the cast would make it.
    if (input.defined() && is_reduced_float(input.dtype()) && amp::is_autocast_enabled(input.device().type) &&
        target.defined() && !target.is_floating_point()) {
      amp::detail::ExcludeAutocastGuard exclude;
      return cross_entropy_as(input, target, weight, ignore_index, reduction, label_smoothing, kFloat32);
    }
    return amp::autocast_call(
        "cross_entropy", [&](const auto&... t) { return cross_entropy(t...); }, input, target, weight,
        ignore_index, reduction, label_smoothing);
  }
  return cross_entropy_as(input, target, weight, ignore_index, reduction, label_smoothing,
                          input.defined() ? input.dtype() : kFloat32);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                std::string_view reduction) {
  detail::OpRange op_range("nll_loss", log_probs, target, weight);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "nll_loss", [&](const auto&... t) { return nll_loss(t...); }, log_probs, target, weight, ignore_index,
        reduction);
  const char* op = "nll_loss";
  check_floating(op, log_probs, "input");
  Reduction r = parse_reduction(op, reduction);
  ClassShape cs = class_shape(op, log_probs);
  check_class_target(op, log_probs, target, cs, false);
  ScalarType cd = compute_dtype(log_probs.dtype());
  Tensor w = nn_detail::param_as(op, constant(weight), "weight", {cs.C}, log_probs, cd);
  return nll(op, log_probs.to(cd), target, w, ignore_index, r, cs, log_probs.dtype());
}

Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction) {
  detail::OpRange op_range("mse_loss", input, target);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "mse_loss", [&](const auto&... t) { return mse_loss(t...); }, input, target, reduction);
  const char* op = "mse_loss";
  Reduction r = parse_reduction(op, reduction);
  check_same_device(op, input, target, "target");
  ScalarType dt = result_type(input, target);
  EMBER_CHECK(is_floating_point(dt), op, ": expected floating point inputs, got ", input.dtype(), " and ",
              target.dtype());
  broadcast_shapes(op, input.sizes(), target.sizes());
  ScalarType cd = compute_dtype(dt);
  Tensor out;
  {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor d = input.to(cd) - target.to(cd);
    out = reduce(d.mul_(d), r, dt);
  }
  if (needs_grad({input, target})) {
    SavedTensor si(input, false), st(target, false);
    int64_t n = numel_of(broadcast_shapes(op, input.sizes(), target.sizes()));
    record(op, {input, target}, {out}, [si, st, r, n, cd](const GradContext& g) -> std::vector<Tensor> {
      Tensor x = g(si), t = g(st);
      Tensor d = (x.to(cd) - t.to(cd)) * element_grad(g.grad(), r, n) * 2;
      return {g.needs(0) ? sum_to(d, x.sizes()) : Tensor(), g.needs(1) ? sum_to(-d, t.sizes()) : Tensor()};
    });
  }
  return out;
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        std::string_view reduction, const Tensor& pos_weight) {
  detail::OpRange op_range("binary_cross_entropy_with_logits", input, target, weight, pos_weight);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "binary_cross_entropy_with_logits",
        [&](const auto&... t) { return binary_cross_entropy_with_logits(t...); }, input, target, weight,
        reduction, pos_weight);
  const char* op = "binary_cross_entropy_with_logits";
  Reduction r = parse_reduction(op, reduction);
  check_floating(op, input, "input");
  check_floating(op, target, "target");
  check_same_device(op, input, target, "target");
  EMBER_CHECK(target.sizes().equals(input.sizes()), op, ": target of shape ", target.sizes(),
              " must have the same shape as the input, of shape ", input.sizes());
  ScalarType cd = compute_dtype(input.dtype());
  auto broadcast_param = [&](const Tensor& p, const char* what) {
    check_same_device(op, input, p, what);
    check_floating(op, p, what);
    EMBER_CHECK(nn_detail::broadcasts_to(p.sizes(), input.sizes()), op, ": ", what, " of shape ", p.sizes(),
                " does not broadcast to the input's shape ", input.sizes());
    return constant(p).to(cd);
  };
  Tensor pw = pos_weight.defined() ? broadcast_param(pos_weight, "pos_weight") : Tensor();
  Tensor w = weight.defined() ? broadcast_param(weight, "weight") : Tensor();
  Tensor out;
  {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor l = empty(input.sizes(), TensorOptions(cd).device(input.device()));
    Tensor kernel_pw = pw.defined() ? pw : full({}, 1.0, TensorOptions(cd).device(input.device()));
    if (l.numel() > 0) bce_with_logits_stub(input.device())(l, input, target, kernel_pw);
    if (w.defined()) l.mul_(w);
    out = reduce(l, r, input.dtype());
  }
  if (needs_grad({input, target})) {
    // With lw = 1 + (pw - 1) t, loss = (1 - t) x + lw softplus(-x), so
    // d/dx = lw sigmoid(x) - pw t and d/dt = (1 - pw) log_sigmoid(x) - x (PyTorch's formulas).
    SavedTensor si(input, false), st(target, false);
    record(op, {input, target}, {out}, [si, st, w, pw, r, cd](const GradContext& g) -> std::vector<Tensor> {
      Tensor x = g(si).to(cd), t = g(st).to(cd);
      Tensor ge = element_grad(g.grad(), r, x.numel());
      if (w.defined()) ge = ge * w;
      Tensor gx, gt;
      if (g.needs(0)) gx = ge * (pw.defined() ? ((pw - 1) * t + 1) * sigmoid(x) - pw * t : sigmoid(x) - t);
      if (g.needs(1)) gt = ge * (pw.defined() ? (pw - 1) * softplus(-x) - x : -x);
      return {gx, gt};
    });
  }
  return out;
}

}  // namespace ember
