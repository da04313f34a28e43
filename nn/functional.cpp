#include "ember/nn/functional.h"

#include <limits>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/ops/linalg.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/shape.h"

namespace ember::nn::functional {
namespace {

Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::Mean:
      return loss.mean();
    case Reduction::Sum:
      return loss.sum();
    case Reduction::None:
      break;
  }
  return loss;
}

void check_loss_inputs(const char* op, const Tensor& input, const Tensor& target) {
  EMBER_CHECK(input.is_floating_point() && target.is_floating_point(), op,
              ": expected floating point input and target, got ", input.dtype(), " and ", target.dtype());
  EMBER_CHECK(input.device() == target.device(), op, ": input is on ", input.device(), " but target on ",
              target.device());
  broadcast_shapes(op, input.sizes(), target.sizes());  // named by the loss, not by the sub inside it
}

void check_linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  EMBER_CHECK(weight.dim() == 2, "linear: expected a 2D weight [out_features, in_features], got ",
              weight.sizes());
  EMBER_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), "linear: input has ",
              input.dim() ? input.size(-1) : 0, " features, but the weight is ", weight.sizes(), " (input ",
              input.sizes(), ")");
  EMBER_CHECK(!bias.defined() || bias.sizes().equals({weight.size(0)}), "linear: expected a bias of shape [",
              weight.size(0), "], got ", bias.sizes());
  EMBER_CHECK(input.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == weight.dtype()),
              "linear: expected input, weight and bias of one dtype, got ", input.dtype(), ", ",
              weight.dtype(), " and ", bias.defined() ? to_string(bias.dtype()) : "no bias");
  EMBER_CHECK(input.device() == weight.device() && (!bias.defined() || bias.device() == weight.device()),
              "linear: expected input, weight and bias on one device, got ", input.device(), ", ",
              weight.device(), " and ", bias.defined() ? bias.device().str() : "no bias");
}

// input [..., in]'s shape with `features` last.
DimVector linear_sizes(const Tensor& input, int64_t features) {
  DimVector sizes(input.sizes());
  sizes.back() = features;
  return sizes;
}

// Under a lower-precision autocast, a linear on a device with the fused product and float32
// weight and bias runs on their cached casts but is differentiable in the parameters themselves:
// their gradients come out of the product in float32, with no casts back (2 x 72 launches in a
// BERT-base step; cuBLASLt (13.0) refuses a float32 bias for a bf16 output, so the bias is still
// cast). Undefined where this does not apply.
Tensor linear_on_float32_params(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const DeviceType dev = input.device().type;
  if (!bias.defined() || input.dim() < 2 || !input.is_contiguous() || input.dtype() == kFloat64 ||
      weight.dtype() != kFloat32 || bias.dtype() != kFloat32 || weight.device() != input.device() ||
      bias.device() != input.device() || !addmm_bias_stub.has(dev))
    return {};
  const std::optional<ScalarType> to = amp::detail::target_dtype(
      amp::detail::policy_of("addmm"), dev, {input.dtype(), weight.dtype(), bias.dtype()});
  if (!to || !is_reduced_float(*to)) return {};
  amp::detail::ExcludeAutocastGuard exclude;
  const Tensor x = amp::detail::cast(input, dev, *to), w = amp::detail::cast(weight, dev, *to),
               b = amp::detail::cast(bias, dev, *to);
  check_linear(x, w, b);
  return ember::detail::addmm_bias_of_casts(bias, x, weight.t(), b, w.t());
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  ember::detail::OpRange op_range("linear", input, weight, bias);
  if (amp::detail::autocast_pending) {
    if (Tensor out = linear_on_float32_params(input, weight, bias); out.defined()) return out;
    // Autocast casts the weight itself (a leaf, so its cast is cached), with addmm's policy.
    return amp::autocast_call(
        "addmm", [](const auto&... t) { return linear(t...); }, input, weight, bias);
  }
  check_linear(input, weight, bias);
  if (bias.defined() && input.dim() == 2) return addmm(bias, input, weight.t());
  if (bias.defined() && input.dim() > 2 && input.is_contiguous()) {  // one fused product-plus-bias
    if (is_floating_point(input.dtype()) && addmm_bias_stub.has(input.device().type))
      return ember::detail::addmm_bias_of_casts(bias, input, weight.t(), bias, weight.t());
    return addmm(bias, input.view({-1, input.size(-1)}), weight.t())
        .view(linear_sizes(input, weight.size(0)));
  }
  Tensor out = input.matmul(weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction) {
  ember::detail::OpRange op_range("l1_loss", input, target);
  Reduction r = parse_reduction("l1_loss", reduction);
  check_loss_inputs("l1_loss", input, target);
  return reduce((input - target).abs(), r);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction, double beta) {
  ember::detail::OpRange op_range("smooth_l1_loss", input, target);
  Reduction r = parse_reduction("smooth_l1_loss", reduction);
  check_loss_inputs("smooth_l1_loss", input, target);
  EMBER_CHECK(beta >= 0, "smooth_l1_loss: beta must not be negative, got ", beta);
  Tensor d = (input - target).abs();
  if (beta == 0) return reduce(d, r);
  return reduce(where(d.lt(beta), d.square() * (0.5 / beta), d - 0.5 * beta), r);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            std::string_view reduction) {
  ember::detail::OpRange op_range("binary_cross_entropy", input, target, weight);
  constexpr const char* kOp = "binary_cross_entropy";
  Reduction r = parse_reduction(kOp, reduction);
  check_loss_inputs(kOp, input, target);
  EMBER_CHECK(input.sizes().equals(target.sizes()), kOp, ": expected a target of the input's size ",
              input.sizes(), ", got ", target.sizes());
  if (weight.defined()) {
    EMBER_CHECK(weight.device() == input.device(), kOp, ": input is on ", input.device(), " but weight on ",
                weight.device());
    bool fits = weight.dim() <= input.dim();
    for (int64_t d = 1; fits && d <= weight.dim(); ++d)
      fits = weight.size(-d) == 1 || weight.size(-d) == input.size(-d);
    EMBER_CHECK(fits, kOp, ": a weight of shape ", weight.sizes(), " does not broadcast to the input's ",
                input.sizes());
  }
  Tensor w = weight.defined() ? weight.detach() : weight;  // no gradient, as in PyTorch
  Tensor loss;
  {
    NoGradGuard no_grad;  // recorded below with PyTorch's formulas, finite at 0 and 1
    loss = -(target * input.log().clamp(-100) + (1 - target) * (-input).log1p().clamp(-100));
    if (w.defined()) loss = loss * w;
    loss = reduce(loss, r);
  }
  if (needs_grad({input, target})) {
    SavedTensor sx(input, false), st(target, false);
    const int64_t n = input.numel();
    record(kOp, {input, target}, {loss}, [sx, st, w, r, n](const GradContext& g) -> std::vector<Tensor> {
      Tensor x = g(sx), t = g(st);
      Tensor ge = r == Reduction::Mean ? g.grad() / static_cast<double>(n) : g.grad();
      if (w.defined()) ge = ge * w;
      Tensor dx = g.needs(0) ? ge * (x - t) / (x * (1 - x)).clamp(1e-12) : Tensor();
      Tensor dt = g.needs(1) ? ge * ((-x).log1p().clamp(-100) - x.log().clamp(-100)) : Tensor();
      return {dx, dt};
    });
  }
  return loss;
}

Tensor kl_div(const Tensor& input, const Tensor& target, std::string_view reduction, bool log_target) {
  ember::detail::OpRange op_range("kl_div", input, target);
  constexpr const char* kOp = "kl_div";
  const bool batchmean = reduction == "batchmean";
  EMBER_CHECK(batchmean || reduction == "none" || reduction == "mean" || reduction == "sum", kOp,
              ": reduction must be 'none', 'mean', 'sum' or 'batchmean', got '", reduction, "'");
  Reduction r = batchmean ? Reduction::Sum : parse_reduction(kOp, reduction);
  check_loss_inputs(kOp, input, target);
  Tensor loss;
  if (log_target) {
    loss = target.exp() * (target - input);
  } else {
    // target * log(target), 0 at target 0 with a finite gradient (log of 1 there).
    Tensor positive = target.gt(0);
    loss = target * (where(positive, target, 1.0).log() - input);
  }
  loss = reduce(loss, r);
  if (batchmean && input.dim() > 0) loss = loss / static_cast<double>(input.size(0));
  return loss;
}

Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  ember::detail::OpRange op_range("rms_norm", input, weight);
  int64_t n = static_cast<int64_t>(normalized_shape.size());
  bool trailing = n >= 1 && input.dim() >= n &&
                  IntArrayRef(input.sizes().data() + input.dim() - n, n).equals(normalized_shape);
  EMBER_CHECK(trailing, "rms_norm: expected input with trailing dims ", normalized_shape, ", got input ",
              input.sizes());
  EMBER_CHECK(input.is_floating_point(), "rms_norm: expected a floating point input, got ", input.dtype());
  EMBER_CHECK(!weight.defined() || weight.sizes().equals(normalized_shape),
              "rms_norm: expected weight of shape ", normalized_shape, ", got ", weight.sizes());
  ScalarType cd = input.dtype() == kFloat64 ? kFloat64 : kFloat32;
  double e = eps.value_or(cd == kFloat64 ? std::numeric_limits<double>::epsilon()
                                         : std::numeric_limits<float>::epsilon());
  DimVector dims;
  for (int64_t d = input.dim() - n; d < input.dim(); ++d) dims.push_back(d);
  Tensor x = input.to(cd);
  Tensor out = (x * (x.square().mean(dims, /*keepdim=*/true) + e).rsqrt()).to(input.dtype());
  return weight.defined() ? out * weight : out;
}

Tensor normalize(const Tensor& input, double p, int64_t dim, double eps) {
  ember::detail::OpRange op_range("normalize", input);
  EMBER_CHECK(input.is_floating_point(), "normalize: expected a floating point input, got ", input.dtype());
  return input / input.norm(p, {dim}, /*keepdim=*/true).clamp(eps);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  ember::detail::OpRange op_range("cosine_similarity", x1, x2);
  EMBER_CHECK(x1.is_floating_point() && x2.is_floating_point(),
              "cosine_similarity: expected floating point inputs, got ", x1.dtype(), " and ", x2.dtype());
  DimVector shape = broadcast_shapes("cosine_similarity", x1.sizes(), x2.sizes());
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  // PyTorch's order: each side normalized first, which keeps large norms from overflowing.
  return ((a / a.norm(2, {dim}, true).clamp(eps)) * (b / b.norm(2, {dim}, true).clamp(eps))).sum({dim});
}

Tensor relu6(const Tensor& input) {
  ember::detail::OpRange op_range("relu6", input);
  return clamp(input, 0, 6);
}

Tensor hardswish(const Tensor& input) {
  ember::detail::OpRange op_range("hardswish", input);
  return input * clamp(input + 3, 0, 6) / 6;
}

}  // namespace ember::nn::functional
