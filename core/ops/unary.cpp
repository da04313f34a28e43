// Frontends of the unary elementwise ops: output dtype and shape, then the device's kernel.
#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/type_promotion.h"

namespace ember {

constinit DispatchStub<UnaryFn> unary_stub("unary");

namespace {

using ops::UnaryOp;
constexpr auto F32 = AutocastPolicy::Float32;
constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({
    {"neg", NONE, true},       {"abs", NONE, true},   {"sign", NONE, true},    {"relu", NONE, true},
    {"square", NONE, true},    {"clamp", NONE, true}, {"exp", F32, true},      {"log", F32, true},
    {"log1p", F32, true},      {"expm1", F32, true},  {"sqrt", NONE, true},    {"rsqrt", F32, true},
    {"sin", NONE, true},       {"cos", NONE, true},   {"tanh", NONE, true},    {"sigmoid", NONE, true},
    {"gelu", NONE, true},      {"silu", NONE, true},  {"softplus", F32, true}, {"leaky_relu", NONE, true},
    {"reciprocal", F32, true}, {"erf", NONE, true},   {"floor", NONE, true},   {"ceil", NONE, true},
    {"round", NONE, true},     {"trunc", NONE, true},
});

ScalarType result_dtype(const char* name, UnaryOp op, ScalarType in) {
  if (ops::is_float_only(op)) return to_float_dtype(in);
  EMBER_CHECK(in != kBool || op == UnaryOp::Sign, name, ": not supported for bool tensors");
  return in;
}

// A backward formula: d(loss)/dx from the output gradient g, the input x and the output.
using Formula = Tensor (*)(const Tensor& g, const Tensor& x, const Tensor& out,
                           const ops::ElementwiseParams& p);
enum Saves : int { kNone = 0, kInput = 1, kOutput = 2 };

Tensor unary(const char* name, UnaryOp op, const Tensor& x, Formula formula, int saves,
             ops::ElementwiseParams p = {}, std::optional<ScalarType> dtype = std::nullopt) {
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        name, [&](const Tensor& t) { return unary(name, op, t, formula, saves, p, dtype); }, x);
  Tensor out = empty_like_layout(
      x.sizes(), TensorOptions(dtype.value_or(result_dtype(name, op, x.dtype()))).device(x.device()), {x});
  if (out.numel() > 0) unary_stub(x.device())(op, out, x, p);
  if (needs_grad({x})) {
    SavedTensor sx(saves & kInput ? x : Tensor(), false), so(saves & kOutput ? out : Tensor(), true);
    record(name, {x}, {out},
           [=](const GradContext& g) -> std::vector<Tensor> { return {formula(g.grad(), g(sx), g(so), p)}; });
  }
  return out;
}

// A frontend that is unary() alone: its range, then unary().
Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, Formula formula, int saves,
                ops::ElementwiseParams p = {}) {
  detail::OpRange op_range(name, x);
  return unary(name, op, x, formula, saves, p);
}

// An in-place frontend, range included: the backward sees x's value before the op (a clone, only
// when the formula uses it) and after it (the output).
const Tensor& unary_(const char* name, UnaryOp op, const Tensor& x, Formula formula, int saves,
                     ops::ElementwiseParams p = {}) {
  detail::OpRange op_range(name, x);
  check_can_cast(name, result_dtype(name, op, x.dtype()), x.dtype());
  check_no_internal_overlap(name, x);
  check_inplace_differentiable(name, x);
  bool grad = needs_grad({x});
  Tensor before = grad && (saves & kInput) ? x.detach().clone() : Tensor();
  if (x.numel() > 0) unary_stub(x.device())(op, x, x, p);
  x.bump_version();
  if (grad) {
    SavedTensor sx(before, false), so(saves & kOutput ? x : Tensor(), true);
    record(name, {x}, {x},
           [=](const GradContext& g) -> std::vector<Tensor> { return {formula(g.grad(), g(sx), g(so), p)}; });
  }
  return x;
}

ops::ElementwiseParams clamp_params(const char* name, const std::optional<Scalar>& lo,
                                    const std::optional<Scalar>& hi) {
  EMBER_CHECK(lo || hi, name, ": at least one of 'min' or 'max' must not be None");
  return {lo ? lo->to_double() : NAN, hi ? hi->to_double() : NAN};
}

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)

// Formulas shared by an op and its in-place variant.
// A step function's: zero wherever it is differentiable, as PyTorch gives everywhere.
Tensor zero_grad(const Tensor& g, const Tensor&, const Tensor&, const ops::ElementwiseParams&) {
  return zeros_like(g);
}
Tensor neg_grad(const Tensor& g, const Tensor&, const Tensor&, const ops::ElementwiseParams&) { return -g; }
// One pass over the gradient and the output (a comparison and a product with a bool mask took two,
// the second slow on mixed dtypes: a third of a ResNet-50 step's kernel time on the H200).
Tensor relu_grad(const Tensor& g, const Tensor&, const Tensor& out, const ops::ElementwiseParams&) {
  return threshold_backward(g, out, 0);
}
Tensor exp_grad(const Tensor& g, const Tensor&, const Tensor& out, const ops::ElementwiseParams&) {
  return g * out;
}
Tensor sqrt_grad(const Tensor& g, const Tensor&, const Tensor& out, const ops::ElementwiseParams&) {
  return g / (out * 2);
}
Tensor tanh_grad(const Tensor& g, const Tensor&, const Tensor& out, const ops::ElementwiseParams&) {
  return g * (1 - out * out);
}
Tensor sigmoid_grad(const Tensor& g, const Tensor&, const Tensor& out, const ops::ElementwiseParams&) {
  return g * out * (1 - out);
}

Tensor clamp_grad(const Tensor& g, const Tensor& x, const Tensor&, const ops::ElementwiseParams& p) {
  Tensor keep = x == x;
  if (p.a == p.a) keep = keep && x >= p.a;
  if (p.b == p.b) keep = keep && x <= p.b;
  return g * keep;
}

}  // namespace

Tensor neg(const Tensor& x) { return unary_op("neg", UnaryOp::Neg, x, neg_grad, kNone); }
Tensor abs(const Tensor& x) {
  return unary_op(
      "abs", UnaryOp::Abs, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return g * sign(x); }, kInput);
}
Tensor sign(const Tensor& x) { return unary_op("sign", UnaryOp::Sign, x, zero_grad, kNone); }
Tensor floor(const Tensor& x) { return unary_op("floor", UnaryOp::Floor, x, zero_grad, kNone); }
Tensor ceil(const Tensor& x) { return unary_op("ceil", UnaryOp::Ceil, x, zero_grad, kNone); }
Tensor round(const Tensor& x) { return unary_op("round", UnaryOp::Round, x, zero_grad, kNone); }
Tensor trunc(const Tensor& x) { return unary_op("trunc", UnaryOp::Trunc, x, zero_grad, kNone); }
Tensor relu(const Tensor& x) { return unary_op("relu", UnaryOp::Relu, x, relu_grad, kOutput); }
Tensor square(const Tensor& x) {
  return unary_op(
      "square", UnaryOp::Square, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return g * x * 2; }, kInput);
}
Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::Exp, x, exp_grad, kOutput); }
Tensor log(const Tensor& x) {
  return unary_op(
      "log", UnaryOp::Log, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return g / x; }, kInput);
}
Tensor log1p(const Tensor& x) {
  return unary_op(
      "log1p", UnaryOp::Log1p, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return g / (x + 1); }, kInput);
}
Tensor expm1(const Tensor& x) {
  return unary_op(
      "expm1", UnaryOp::Expm1, x,
      [](const Tensor& g, const Tensor&, const Tensor& out, const auto&) { return g * (out + 1); }, kOutput);
}
Tensor sqrt(const Tensor& x) { return unary_op("sqrt", UnaryOp::Sqrt, x, sqrt_grad, kOutput); }
Tensor rsqrt(const Tensor& x) {
  return unary_op(
      "rsqrt", UnaryOp::Rsqrt, x,
      [](const Tensor& g, const Tensor&, const Tensor& out, const auto&) {
        return g * out * out * out * -0.5;
      },
      kOutput);
}
Tensor sin(const Tensor& x) {
  return unary_op(
      "sin", UnaryOp::Sin, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return g * cos(x); }, kInput);
}
Tensor cos(const Tensor& x) {
  return unary_op(
      "cos", UnaryOp::Cos, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return -g * sin(x); }, kInput);
}
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::Tanh, x, tanh_grad, kOutput); }
Tensor sigmoid(const Tensor& x) { return unary_op("sigmoid", UnaryOp::Sigmoid, x, sigmoid_grad, kOutput); }
Tensor silu(const Tensor& x) {
  return unary_op(
      "silu", UnaryOp::Silu, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) {
        Tensor s = sigmoid(x);
        return g * s * (x * (1 - s) + 1);
      },
      kInput);
}
Tensor reciprocal(const Tensor& x) {
  return unary_op(
      "reciprocal", UnaryOp::Reciprocal, x,
      [](const Tensor& g, const Tensor&, const Tensor& out, const auto&) { return -g * out * out; }, kOutput);
}
Tensor erf(const Tensor& x) {
  return unary_op(
      "erf", UnaryOp::Erf, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) {
        return g * exp(-x * x) * kTwoOverSqrtPi;
      },
      kInput);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  detail::OpRange op_range("gelu", x);
  EMBER_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  if (approximate == "tanh")
    return unary(
        "gelu", UnaryOp::GeluTanh, x,
        [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) {
          return gelu_backward(g, x, "tanh");
        },
        kInput);
  return unary(
      "gelu", UnaryOp::Gelu, x,
      [](const Tensor& g, const Tensor& x, const Tensor&, const auto&) { return gelu_backward(g, x); },
      kInput);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  detail::OpRange op_range("softplus", x);
  EMBER_CHECK(beta != 0, "softplus: beta must be nonzero");
  return unary("softplus", UnaryOp::Softplus, x,
               [](const Tensor& g, const Tensor& x, const Tensor&, const ops::ElementwiseParams& p) {
                 Tensor z = x * p.a;
                 return g * sigmoid(z).masked_fill(z > p.b, 1);
               },
               kInput, {beta, threshold});
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return unary_op("leaky_relu", UnaryOp::LeakyRelu, x,
                  [](const Tensor& g, const Tensor& x, const Tensor&, const ops::ElementwiseParams& p) {
                    return where(x > 0, g, g * p.a);
                  },
                  kInput, {negative_slope});
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::OpRange op_range("clamp", x);
  bool float_bound = (min && min->is_floating_point()) || (max && max->is_floating_point());
  ScalarType dt = float_bound ? to_float_dtype(x.dtype()) : result_dtype("clamp", UnaryOp::Clamp, x.dtype());
  return unary("clamp", UnaryOp::Clamp, x, clamp_grad, kInput, clamp_params("clamp", min, max), dt);
}

Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::sign() const { return ember::sign(*this); }
Tensor Tensor::floor() const { return ember::floor(*this); }
Tensor Tensor::ceil() const { return ember::ceil(*this); }
Tensor Tensor::round() const { return ember::round(*this); }
Tensor Tensor::trunc() const { return ember::trunc(*this); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::log1p() const { return ember::log1p(*this); }
Tensor Tensor::expm1() const { return ember::expm1(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::rsqrt() const { return ember::rsqrt(*this); }
Tensor Tensor::sin() const { return ember::sin(*this); }
Tensor Tensor::cos() const { return ember::cos(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::square() const { return ember::square(*this); }
Tensor Tensor::reciprocal() const { return ember::reciprocal(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ember::clamp(*this, min, max);
}
const Tensor& Tensor::neg_() const { return unary_("neg_", UnaryOp::Neg, *this, neg_grad, kNone); }
const Tensor& Tensor::exp_() const { return unary_("exp_", UnaryOp::Exp, *this, exp_grad, kOutput); }
const Tensor& Tensor::sqrt_() const { return unary_("sqrt_", UnaryOp::Sqrt, *this, sqrt_grad, kOutput); }
const Tensor& Tensor::relu_() const { return unary_("relu_", UnaryOp::Relu, *this, relu_grad, kOutput); }
const Tensor& Tensor::tanh_() const { return unary_("tanh_", UnaryOp::Tanh, *this, tanh_grad, kOutput); }
const Tensor& Tensor::sigmoid_() const {
  return unary_("sigmoid_", UnaryOp::Sigmoid, *this, sigmoid_grad, kOutput);
}
const Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return unary_("clamp_", UnaryOp::Clamp, *this, clamp_grad, kInput, clamp_params("clamp_", min, max));
}

Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace ember
