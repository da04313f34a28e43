// Frontends of layer_norm, batch_norm and group_norm: shape checks, statistics, then the
// device's kernels. batch_norm runs in its input's layout (NCHW or channels-last) with a
// statistics pass and an elementwise pass each way; group_norm's statistics become a scale and
// shift per channel for the per-channel affine kernel.
#include "ember/core/ops/normalization.h"

#include <array>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<LayerNormFn> layer_norm_stub("layer_norm");
constinit DispatchStub<LayerNormBackwardFn> layer_norm_backward_stub("layer_norm_backward");
constinit DispatchStub<RowMomentsFn> row_moments_stub("row_moments");
constinit DispatchStub<ChannelAffineFn> channel_affine_stub("channel_affine");
constinit DispatchStub<BatchNormStatsFn> batch_norm_stats_stub("batch_norm_stats");
constinit DispatchStub<BatchNormElemtFn> batch_norm_elemt_stub("batch_norm_elemt");
constinit DispatchStub<BatchNormBackwardReduceFn> batch_norm_backward_reduce_stub(
    "batch_norm_backward_reduce");
constinit DispatchStub<BatchNormBackwardElemtFn> batch_norm_backward_elemt_stub("batch_norm_backward_elemt");

namespace {

using nn_detail::check_floating;
using nn_detail::compute_dtype;
using nn_detail::layer_norm_backward_fused;
using nn_detail::layer_norm_param_dtype;
using nn_detail::param_as;

const OpRegistrar registrar({
    {"layer_norm", AutocastPolicy::Float32, true},
    // On neither of PyTorch's autocast lists: it runs in its input's dtype (statistics in float32).
    {"batch_norm", AutocastPolicy::None, true},
    {"batch_norm_relu", AutocastPolicy::None, true},
    {"group_norm", AutocastPolicy::Float32, true},
});

void check_nc_input(const char* op, const Tensor& x) {
  check_floating(op, x, "input");
  EMBER_CHECK(x.dim() >= 2, op, ": expected an input of shape (N, C, *) with at least 2 dims, got ",
              x.sizes());
}

// out = x * scale[c] + shift[c] over x viewed as [A, C, B].
Tensor channel_affine(const Tensor& x, int64_t A, int64_t C, int64_t B, const Tensor& scale,
                      const Tensor& shift) {
  Tensor out = empty(x.sizes(), x.options());
  if (out.numel() > 0) channel_affine_stub(x.device())(out.view({A, C, B}), x.view({A, C, B}), scale, shift);
  return out;
}

// batch_norm's input as its kernels see it: a contiguous [A, C, B], where a channels-last x
// (NHWC in memory, as torch.channels_last) is [N * H * W, C, 1]. Other layouts are copied into
// NCHW order; out and dx take x's layout, as in PyTorch.
struct ChannelLayout {
  bool channels_last;
  int64_t A, C, B;

  explicit ChannelLayout(const Tensor& x)
      : channels_last(x.dim() == 4 && !x.is_contiguous() && x.is_contiguous(MemoryFormat::ChannelsLast)),
        A(x.size(0)),
        C(x.size(1)),
        B(numel_of(IntArrayRef(x.sizes().data() + 2, x.dim() - 2))) {}

  // t (of x's sizes) as the kernels' [A, C, B], copied into this layout when it is in another.
  Tensor view(const Tensor& t) const {
    if (channels_last) return t.permute({0, 2, 3, 1}).contiguous().view({A * B, C, 1});
    return t.contiguous().view({A, C, B});
  }
  Tensor empty_like(const Tensor& x) const {
    return empty(x.sizes(), x.options().memory_format(channels_last ? MemoryFormat::ChannelsLast
                                                                    : MemoryFormat::Contiguous));
  }
};

// --- Backward, with ember ops. Each formula works in a view of x where the statistics broadcast
// and `dims` are the dims they reduce. ---

// The saved statistics; under create_graph, when x itself needs second derivatives, the same
// statistics recomputed from x (in the compute dtype) so double backward sees how they depend on x.
std::pair<Tensor, Tensor> backward_stats(const Tensor& x, IntArrayRef dims, double eps, const Tensor& mean,
                                         const Tensor& rstd) {
  if (!GradMode::is_enabled() || !x.requires_grad()) return {mean, rstd};
  Tensor m = x.mean(dims, true);
  Tensor c = x - m;
  return {m, rsqrt((c * c).mean(dims, true) + eps)};
}

// dx of xhat = (x - mean) * rstd, the statistics taken over `dims`, from gxhat (the gradient
// reaching xhat).
Tensor normalize_backward(const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd, IntArrayRef dims) {
  return rstd * (gxhat - gxhat.mean(dims, true) - xhat * (gxhat * xhat).mean(dims, true));
}

// A parameter's gradient summed over `dims` of a view and shaped like the parameter (none when
// the parameter takes no gradient).
Tensor param_grad(bool needed, const Tensor& t, IntArrayRef dims, IntArrayRef sizes) {
  return needed ? t.sum(dims).reshape(sizes) : Tensor();
}

// batch_norm's gradients (x, weight, bias) from the fused kernels, each computed only when `want`
// says so; first order only (nothing recorded). dw and db come in weight's and bias's dtypes.
// With relu, gy is the gradient of relu(batch_norm(x)), which the kernels mask themselves.
std::vector<Tensor> batch_norm_backward_fused(const Tensor& gy, const Tensor& x, const Tensor& mean,
                                              const Tensor& invstd, const Tensor& w, const Tensor& b,
                                              ScalarType bias_dtype, bool batch_stats, bool relu,
                                              std::array<bool, 3> want) {
  ChannelLayout lay(x);
  TensorOptions co = mean.options();
  Tensor dw = want[1] ? empty({lay.C}, w.options()) : Tensor();
  Tensor db = want[2] ? empty({lay.C}, co.dtype(bias_dtype)) : Tensor();
  Tensor dx = want[0] ? lay.empty_like(x) : Tensor();
  if (x.numel() == 0) {
    for (Tensor* t : {&dw, &db})
      if (t->defined()) t->zero_();
    return {dx, dw, db};
  }
  Tensor xv = lay.view(x), gv = lay.view(gy.to(x.dtype()));
  auto dense = [](const Tensor& t) { return t.defined() ? t.contiguous() : t; };
  Tensor wc = dense(w), bc = relu ? dense(b) : Tensor();
  Tensor sum_dy, sum_dy_xmu;
  if (want[1] || want[2] || (want[0] && batch_stats)) {
    sum_dy = empty({lay.C}, co);
    sum_dy_xmu = empty({lay.C}, co);
    batch_norm_backward_reduce_stub(x.device())(sum_dy, sum_dy_xmu, dw, db, gv, xv, mean, invstd, wc, bc,
                                                relu);
  }
  if (want[0])
    batch_norm_backward_elemt_stub(x.device())(lay.view(dx), gv, xv, mean, invstd, wc, bc,
                                               batch_stats ? sum_dy : Tensor(), sum_dy_xmu,
                                               1.0 / static_cast<double>(lay.A * lay.B), relu);
  return {dx, dw, db};
}

// batch_norm's gradients (x, weight, bias) from gy, each only when `want` says so; with relu_out
// (the output of relu(batch_norm(x))) defined, gy is that ReLU's. In the [A, C, B] view of x:
// y = xhat * w + b with statistics per channel (over dims 0 and 2); running statistics are
// constants, making the op affine in x. First order (the usual backward): the fused kernels;
// under create_graph, the formula records its own graph.
std::vector<Tensor> batch_norm_grads(const Tensor& gy0, const Tensor& x0, const Tensor& w, const Tensor& b,
                                     const Tensor& mean0, const Tensor& invstd0, ScalarType bias_dtype,
                                     bool batch_stats, double eps, const Tensor& relu_out,
                                     std::array<bool, 3> want) {
  if (!needs_grad({gy0, x0, w, b}))
    return batch_norm_backward_fused(gy0, x0, mean0, invstd0, w, b, bias_dtype, batch_stats,
                                     relu_out.defined(), want);
  Tensor gy = relu_out.defined() ? threshold_backward(gy0, relu_out, 0) : gy0;
  int64_t A = x0.size(0), C = x0.size(1), B = numel_of(IntArrayRef(x0.sizes().data() + 2, x0.dim() - 2));
  Tensor x = x0.reshape({A, C, B}).to(mean0.dtype()), g = gy.reshape({A, C, B});
  Tensor mean = mean0.view({1, C, 1}), invstd = invstd0.view({1, C, 1});
  if (batch_stats) std::tie(mean, invstd) = backward_stats(x, {0, 2}, eps, mean, invstd);
  Tensor xhat = (x - mean) * invstd;
  Tensor gxhat = w.defined() ? g * w.view({1, C, 1}) : g;
  Tensor dx;
  if (want[0])
    dx = (batch_stats ? normalize_backward(gxhat, xhat, invstd, {0, 2}) : gxhat * invstd).reshape(x0.sizes());
  return {dx, param_grad(want[1], g * xhat, {0, 2}, {C}), param_grad(want[2], g, {0, 2}, {C})};
}

// Records the backward of batch_norm (op "batch_norm", inputs x, weight, bias) or of
// batch_norm_relu (inputs x, residual, weight, bias): the gradient through the ReLU is the
// incoming one where the saved output is positive. With a residual that masked gradient is also
// the residual's, so one pass makes it; without, batch_norm's kernels mask it as they read it.
void record_batch_norm(const char* op, const Tensor& x, const Tensor& residual, bool relu,
                       const Tensor& weight, const Tensor& bias, const Tensor& out, const Tensor& mean,
                       const Tensor& invstd, bool batch_stats, double eps) {
  ScalarType bias_dtype = bias.defined() ? bias.dtype() : mean.dtype();
  SavedTensor sx(x, false), sw(weight, false), sb(bias, false), smean(mean, false), sinvstd(invstd, false);
  SavedTensor sout = relu ? SavedTensor(out, true) : SavedTensor();
  const bool add = residual.defined();
  std::vector<Tensor> inputs{x, weight, bias};
  if (add) inputs.insert(inputs.begin() + 1, residual);
  record(op, inputs, {out},
         [sx, sw, sb, smean, sinvstd, sout, add, relu, bias_dtype, eps,
          batch_stats](const GradContext& g) -> std::vector<Tensor> {
           Tensor gy = add ? threshold_backward(g.grad(), g(sout), 0) : g.grad();
           const int k = add ? 1 : 0;
           std::vector<Tensor> grads = batch_norm_grads(
               gy, g(sx), g(sw), g(sb), g(smean), g(sinvstd), bias_dtype, batch_stats, eps,
               relu && !add ? g(sout) : Tensor(), {g.needs(0), g.needs(1 + k), g.needs(2 + k)});
           if (add) grads.insert(grads.begin() + 1, g.needs(1) ? gy : Tensor());
           return grads;
         });
}

// batch_norm, then (batch_norm_relu) the residual and the ReLU in the same elementwise pass.
std::tuple<Tensor, Tensor, Tensor> batch_norm_impl(const char* op, const Tensor& x, const Tensor& residual,
                                                   bool relu, const Tensor& running_mean,
                                                   const Tensor& running_var, const Tensor& weight,
                                                   const Tensor& bias, bool training, double momentum,
                                                   double eps) {
  check_nc_input(op, x);
  EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must both be given or both be undefined");
  if (residual.defined())
    EMBER_CHECK(residual.sizes().equals(x.sizes()) && residual.dtype() == x.dtype() &&
                    residual.device() == x.device(),
                op, ": expected a residual like the input (", x.sizes(), ", ", x.dtype(), ", ", x.device(),
                "), got ", residual.sizes(), ", ", residual.dtype(), ", ", residual.device());
  int64_t C = x.size(1);
  ScalarType cd = compute_dtype(x.dtype());
  bool grad = needs_grad({x, residual, weight, bias});
  NoGradGuard no_grad;  // the forward (running stats included) is recorded as one op
  // All read (and the running stats updated in place) in their own dtypes.
  nn_detail::check_param(op, weight, "weight", {C}, x);
  nn_detail::check_param(op, bias, "bias", {C}, x);
  nn_detail::check_param(op, running_mean, "running_mean", {C}, x);
  nn_detail::check_param(op, running_var, "running_var", {C}, x);

  bool batch_stats = training || !running_mean.defined();
  ChannelLayout lay(x);
  int64_t count = lay.A * lay.B;
  EMBER_CHECK(!training || count != 1, op,
              ": expected more than 1 value per channel when training, got input of shape ", x.sizes());
  TensorOptions co = TensorOptions(cd).device(x.device());
  if (x.numel() == 0) {
    Tensor none = empty({0}, co);
    Tensor out = lay.empty_like(x);
    if (grad) {
      Tensor stat = zeros({C}, co);
      record_batch_norm(op, x, residual, relu, weight, bias, out, stat, stat, batch_stats, eps);
    }
    return {out, none, none};
  }

  Tensor in = lay.view(x), out = lay.empty_like(x);
  Tensor mean = empty({C}, co), invstd = empty({C}, co);
  // Eval takes the statistics from the running stats (an undefined input tells the stub);
  // training updates them, through a contiguous copy for a strided one.
  auto dense = [](const Tensor& t) { return t.defined() ? t.contiguous() : t; };
  Tensor rm = dense(running_mean), rv = dense(running_var);
  batch_norm_stats_stub(x.device())(mean, invstd, rm, rv, batch_stats ? in : Tensor(), momentum, eps);
  for (auto [r, t] : {std::pair{&running_mean, &rm}, {&running_var, &rv}}) {
    if (!training || !t->defined()) continue;
    if (t->is_same(*r))
      r->bump_version();  // written by the kernel
    else
      r->copy_(*t);
  }
  batch_norm_elemt_stub(x.device())(lay.view(out), in, mean, invstd, dense(weight), dense(bias),
                                    residual.defined() ? lay.view(residual) : residual, relu);
  if (grad) record_batch_norm(op, x, residual, relu, weight, bias, out, mean, invstd, batch_stats, eps);
  return {out, mean, invstd};
}

}  // namespace

ScalarType nn_detail::layer_norm_param_dtype(const Tensor& weight, const Tensor& bias, ScalarType x,
                                             ScalarType cd) {
  const Tensor& p = weight.defined() ? weight : bias;
  if (!p.defined() || (p.dtype() != x && p.dtype() != cd)) return cd;
  return !weight.defined() || !bias.defined() || weight.dtype() == bias.dtype() ? p.dtype() : cd;
}

std::vector<Tensor> nn_detail::layer_norm_backward_fused(const Tensor& gy, const Tensor& x,
                                                         const Tensor& mean, const Tensor& rstd,
                                                         const Tensor& w, int64_t M, int64_t N,
                                                         IntArrayRef wsizes, ScalarType pd,
                                                         std::array<bool, 3> want) {
  TensorOptions po = mean.options().dtype(pd);
  Tensor dx = want[0] ? empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = want[1] ? empty(wsizes, po) : Tensor();
  Tensor db = want[2] ? empty(wsizes, po) : Tensor();
  if (M > 0 && N > 0 && (want[0] || want[1] || want[2])) {
    layer_norm_backward_stub(x.device())(
        want[0] ? dx.view({M, N}) : dx, want[1] ? dw.view({N}) : dw, want[2] ? db.view({N}) : db,
        gy.to(x.dtype()).contiguous().view({M, N}), x.contiguous().view({M, N}), mean.view({M}),
        rstd.view({M}), w.defined() ? w.to(pd).contiguous().view({N}) : w);
  } else {
    for (Tensor* t : {&dw, &db})
      if (t->defined()) t->zero_();
  }
  return {dx, dw, db};
}

std::vector<Tensor> nn_detail::layer_norm_backward_graph(const Tensor& gy, const Tensor& x,
                                                         const Tensor& mean, const Tensor& rstd,
                                                         const Tensor& w, int64_t M, int64_t N,
                                                         IntArrayRef wsizes, ScalarType cd, double eps,
                                                         std::array<bool, 3> want) {
  Tensor xm = x.reshape({M, N}).to(cd), gym = gy.reshape({M, N});
  auto [m, r] = backward_stats(xm, {1}, eps, mean.view({M, 1}), rstd.view({M, 1}));
  Tensor xhat = (xm - m) * r;
  Tensor dx =
      want[0] ? normalize_backward(w.defined() ? gym * w.reshape({N}) : gym, xhat, r, {1}).reshape(x.sizes())
              : Tensor();
  return {dx, param_grad(want[1], gym * xhat, {0}, wsizes), param_grad(want[2], gym, {0}, wsizes)};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, IntArrayRef normalized_shape,
                                                     const Tensor& weight, const Tensor& bias, double eps) {
  detail::OpRange op_range("native_layer_norm", x, weight, bias);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "layer_norm", [&](const auto&... t) { return native_layer_norm(t...); }, x, normalized_shape, weight,
        bias, eps);
  const char* op = "layer_norm";
  check_floating(op, x, "input");
  auto nd = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(nd >= 1, op, ": expected normalized_shape to have at least one dim, got []");
  EMBER_CHECK(x.dim() >= nd && IntArrayRef(x.sizes().data() + x.dim() - nd, nd).equals(normalized_shape), op,
              ": input of shape ", x.sizes(), " does not end with normalized_shape ", normalized_shape);
  ScalarType cd = compute_dtype(x.dtype());
  ScalarType pd = layer_norm_param_dtype(weight, bias, x.dtype(), cd);
  int64_t N = numel_of(normalized_shape);
  DimVector stat_shape(x.sizes().begin(), x.sizes().end() - nd);
  int64_t M = numel_of(stat_shape);
  stat_shape.resize(stat_shape.size() + static_cast<size_t>(nd), 1);
  Tensor out = empty(x.sizes(), x.options());
  Tensor mean = empty(stat_shape, TensorOptions(cd).device(x.device()));
  Tensor rstd = empty(stat_shape, TensorOptions(cd).device(x.device()));
  {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor w = param_as(op, weight, "weight", normalized_shape, x, pd);
    Tensor b = param_as(op, bias, "bias", normalized_shape, x, pd);
    if (M > 0)
      layer_norm_stub(x.device())(out.view({M, N}), mean.view({M}), rstd.view({M}),
                                  x.contiguous().view({M, N}), w, b, eps);
  }
  if (needs_grad({x, weight, bias})) {
    // In the [M, N] view: y = xhat * w + b with statistics over dim 1.
    SavedTensor sx(x, false), sw(weight, false), smean(mean, false), srstd(rstd, false);
    DimVector wsizes(normalized_shape);
    record(op, {x, weight, bias}, {out},
           [sx, sw, smean, srstd, wsizes, M, N, cd, pd, eps](const GradContext& g) -> std::vector<Tensor> {
             // First order (the usual backward): one fused kernel. Under create_graph, the formula
             // below records its own graph.
             Tensor x0 = g(sx), w = g(sw);
             if (!needs_grad({g.grad(), x0, w}))
               return layer_norm_backward_fused(g.grad(), x0, g(smean), g(srstd), w, M, N, wsizes, pd,
                                                {g.needs(0), g.needs(1), g.needs(2)});
             return nn_detail::layer_norm_backward_graph(g.grad(), x0, g(smean), g(srstd), w, M, N, wsizes,
                                                         cd, eps, {g.needs(0), g.needs(1), g.needs(2)});
           });
  }
  return {out, mean, rstd};
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  detail::OpRange op_range("layer_norm", x, weight, bias);
  return std::get<0>(native_layer_norm(x, normalized_shape, weight, bias, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& running_mean,
                                                     const Tensor& running_var, const Tensor& weight,
                                                     const Tensor& bias, bool training, double momentum,
                                                     double eps) {
  detail::OpRange op_range("native_batch_norm", x, running_mean, running_var, weight, bias);
  return batch_norm_impl("batch_norm", x, Tensor(), false, running_mean, running_var, weight, bias, training,
                         momentum, eps);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  detail::OpRange op_range("batch_norm", x, running_mean, running_var, weight, bias);
  return std::get<0>(native_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps));
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                       const Tensor& residual) {
  detail::OpRange op_range("batch_norm_relu", x, running_mean, running_var, weight, bias, residual);
  return std::get<0>(batch_norm_impl("batch_norm_relu", x, residual, true, running_mean, running_var, weight,
                                     bias, training, momentum, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& x, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias, double eps) {
  detail::OpRange op_range("native_group_norm", x, weight, bias);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "group_norm", [&](const auto&... t) { return native_group_norm(t...); }, x, num_groups, weight, bias,
        eps);
  const char* op = "group_norm";
  check_nc_input(op, x);
  int64_t N = x.size(0), C = x.size(1), G = num_groups;
  EMBER_CHECK(G > 0 && C % G == 0, op, ": expected the number of channels (", C,
              ") to be divisible by num_groups (", G, "), input of shape ", x.sizes());
  ScalarType cd = compute_dtype(x.dtype());
  bool grad = needs_grad({x, weight, bias});
  NoGradGuard no_grad;  // recorded below as one op
  Tensor w = param_as(op, weight, "weight", {C}, x, cd);
  Tensor b = param_as(op, bias, "bias", {C}, x, cd);

  int64_t HxW = numel_of(IntArrayRef(x.sizes().data() + 2, x.dim() - 2));
  Tensor in = x.contiguous();
  Tensor mean = empty({N, G}, TensorOptions(cd).device(x.device()));
  Tensor rstd = empty({N, G}, TensorOptions(cd).device(x.device()));
  if (N > 0)
    row_moments_stub(x.device())(mean.view({N * G}), rstd.view({N * G}), in.view({N * G, C / G * HxW}), eps);
  // Per (n, c) scale and shift as [N, G, C/G], contiguous, then flat over N * C "channels".
  int64_t Cg = C / G;
  Tensor mean3 = mean.view({N, G, 1}), rstd3 = rstd.view({N, G, 1});
  Tensor scale = w.defined() ? rstd3 * w.view({1, G, Cg}) : rstd3.expand({N, G, Cg}).contiguous();
  Tensor shift = b.defined() ? b.view({1, G, Cg}) - mean3 * scale : -(mean3 * scale);
  Tensor out = channel_affine(in, 1, N * C, HxW, scale.view({N * C}), shift.view({N * C}));
  if (grad) {
    // x as [N, C, HxW] for the affine part (w and b per channel) and as [N, G, C/G * HxW] for
    // the statistics (over dim 2).
    SavedTensor sx(x, false), sw(weight, false), smean(mean, false), srstd(rstd, false);
    record(
        op, {x, weight, bias}, {out},
        [sx, sw, smean, srstd, N, C, G, HxW, cd, eps](const GradContext& g) -> std::vector<Tensor> {
          DimVector groups{N, G, C / G * HxW}, channels{N, C, HxW};
          Tensor x = g(sx).reshape(groups).to(cd), w = g(sw), gy = g.grad().reshape(channels);
          auto [mean, rstd] = backward_stats(x, {2}, eps, g(smean).view({N, G, 1}), g(srstd).view({N, G, 1}));
          Tensor xhat = ((x - mean) * rstd).reshape(channels);
          Tensor dx;
          if (g.needs(0)) {
            Tensor gxhat = w.defined() ? gy * w.view({1, C, 1}) : gy;
            dx = normalize_backward(gxhat.reshape(groups), xhat.reshape(groups), rstd, {2})
                     .reshape(g(sx).sizes());
          }
          return {dx, param_grad(g.needs(1), gy * xhat, {0, 2}, {C}),
                  param_grad(g.needs(2), gy, {0, 2}, {C})};
        });
  }
  return {out, mean, rstd};
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  detail::OpRange op_range("group_norm", x, weight, bias);
  return std::get<0>(native_group_norm(x, num_groups, weight, bias, eps));
}

}  // namespace ember
