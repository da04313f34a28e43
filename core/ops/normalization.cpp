// Frontends of layer_norm, batch_norm and group_norm: shape checks, statistics, then the
// device's kernels. batch_norm and group_norm share the per-channel affine kernel: their
// statistics become a scale and shift per channel.
#include "ember/core/ops/normalization.h"

#include "ember/core/factories.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<LayerNormFn> layer_norm_stub("layer_norm");
constinit DispatchStub<RowMomentsFn> row_moments_stub("row_moments");
constinit DispatchStub<ChannelMomentsFn> channel_moments_stub("channel_moments");
constinit DispatchStub<ChannelAffineFn> channel_affine_stub("channel_affine");

namespace {

using nn_detail::check_floating;
using nn_detail::compute_dtype;
using nn_detail::param_as;

const OpRegistrar registrar({
    {"layer_norm", AutocastPolicy::Float32, true},
    {"batch_norm", AutocastPolicy::Float32, true},
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
  if (out.numel() > 0)
    channel_affine_stub(x.device())(out.view({A, C, B}), x.view({A, C, B}), scale, shift);
  return out;
}

// The per-channel scale and shift that apply (x - mean) * invstd * weight + bias.
std::pair<Tensor, Tensor> scale_shift(const Tensor& mean, const Tensor& invstd,
                                      const Tensor& weight, const Tensor& bias) {
  Tensor scale = weight.defined() ? invstd * weight : invstd.contiguous();
  Tensor shift = bias.defined() ? bias - mean * scale : -(mean * scale);
  return {scale, shift};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, IntArrayRef normalized_shape,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  const char* op = "layer_norm";
  check_floating(op, x, "input");
  auto nd = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(nd >= 1, op, ": expected normalized_shape to have at least one dim, got []");
  EMBER_CHECK(
      x.dim() >= nd && IntArrayRef(x.sizes().data() + x.dim() - nd, nd).equals(normalized_shape),
      op, ": input of shape ", x.sizes(), " does not end with normalized_shape ", normalized_shape);
  ScalarType cd = compute_dtype(x.dtype());
  Tensor w = param_as(op, weight, "weight", normalized_shape, x, cd);
  Tensor b = param_as(op, bias, "bias", normalized_shape, x, cd);

  int64_t N = numel_of(normalized_shape);
  DimVector stat_shape(x.sizes().begin(), x.sizes().end() - nd);
  int64_t M = numel_of(stat_shape);
  stat_shape.resize(stat_shape.size() + static_cast<size_t>(nd), 1);
  Tensor in = x.contiguous();
  Tensor out = empty(x.sizes(), x.options());
  Tensor mean = empty(stat_shape, TensorOptions(cd).device(x.device()));
  Tensor rstd = empty(stat_shape, TensorOptions(cd).device(x.device()));
  if (M > 0)
    layer_norm_stub(x.device())(out.view({M, N}), mean.view({M}), rstd.view({M}), in.view({M, N}),
                                w, b, eps);
  return {out, mean, rstd};
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return std::get<0>(native_layer_norm(x, normalized_shape, weight, bias, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& running_mean,
                                                     const Tensor& running_var,
                                                     const Tensor& weight, const Tensor& bias,
                                                     bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_nc_input(op, x);
  EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must both be given or both be undefined");
  int64_t C = x.size(1);
  ScalarType cd = compute_dtype(x.dtype());
  Tensor w = param_as(op, weight, "weight", {C}, x, cd);
  Tensor b = param_as(op, bias, "bias", {C}, x, cd);
  // Read and updated in place in their own dtype.
  nn_detail::check_param(op, running_mean, "running_mean", {C}, x);
  nn_detail::check_param(op, running_var, "running_var", {C}, x);

  bool batch_stats = training || !running_mean.defined();
  int64_t A = x.size(0), B = numel_of(IntArrayRef(x.sizes().data() + 2, x.dim() - 2));
  int64_t count = A * B;
  EMBER_CHECK(!training || count != 1, op,
              ": expected more than 1 value per channel when training, got input of shape ",
              x.sizes());
  if (x.numel() == 0) {
    Tensor none = empty({0}, TensorOptions(cd).device(x.device()));
    return {empty(x.sizes(), x.options()), none, none};
  }

  Tensor in = x.contiguous();
  Tensor mean, invstd;
  if (batch_stats) {
    mean = empty({C}, TensorOptions(cd).device(x.device()));
    Tensor var = empty({C}, TensorOptions(cd).device(x.device()));
    channel_moments_stub(x.device())(mean, var, in.view({A, C, B}));
    if (training && running_mean.defined()) {
      running_mean.mul_(1 - momentum).add_(mean, momentum);
      running_var.mul_(1 - momentum).add_(var, momentum * static_cast<double>(count) / (count - 1));
    }
    invstd = rsqrt(var + eps);
  } else {
    mean = running_mean.to(cd, /*copy=*/true);
    invstd = rsqrt(running_var.to(cd) + eps);
  }
  auto [scale, shift] = scale_shift(mean, invstd, w, b);
  return {channel_affine(in, A, C, B, scale, shift), mean, invstd};
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return std::get<0>(
      native_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& x, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  const char* op = "group_norm";
  check_nc_input(op, x);
  int64_t N = x.size(0), C = x.size(1), G = num_groups;
  EMBER_CHECK(G > 0 && C % G == 0, op, ": expected the number of channels (", C,
              ") to be divisible by num_groups (", G, "), input of shape ", x.sizes());
  ScalarType cd = compute_dtype(x.dtype());
  Tensor w = param_as(op, weight, "weight", {C}, x, cd);
  Tensor b = param_as(op, bias, "bias", {C}, x, cd);

  int64_t HxW = numel_of(IntArrayRef(x.sizes().data() + 2, x.dim() - 2));
  Tensor in = x.contiguous();
  Tensor mean = empty({N, G}, TensorOptions(cd).device(x.device()));
  Tensor rstd = empty({N, G}, TensorOptions(cd).device(x.device()));
  if (N > 0)
    row_moments_stub(x.device())(mean.view({N * G}), rstd.view({N * G}),
                                 in.view({N * G, C / G * HxW}), eps);
  // Per (n, c) scale and shift as [N, G, C/G], contiguous, then flat over N * C "channels".
  int64_t Cg = C / G;
  Tensor mean3 = mean.view({N, G, 1}), rstd3 = rstd.view({N, G, 1});
  Tensor scale = w.defined() ? rstd3 * w.view({1, G, Cg}) : rstd3.expand({N, G, Cg}).contiguous();
  Tensor shift = b.defined() ? b.view({1, G, Cg}) - mean3 * scale : -(mean3 * scale);
  Tensor out = channel_affine(in, 1, N * C, HxW, scale.view({N * C}), shift.view({N * C}));
  return {out, mean, rstd};
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return std::get<0>(native_group_norm(x, num_groups, weight, bias, eps));
}

}  // namespace ember
