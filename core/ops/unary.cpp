// Frontends of the unary elementwise ops: output dtype and shape, then the device's kernel.
#include "ember/core/copy.h"
#include "ember/core/factories.h"
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
    {"reciprocal", F32, true}, {"erf", F32, true},
});

ScalarType result_dtype(const char* name, UnaryOp op, ScalarType in) {
  if (ops::is_float_only(op)) return to_float_dtype(in);
  EMBER_CHECK(in != kBool || op == UnaryOp::Sign, name, ": not supported for bool tensors");
  return in;
}

Tensor unary(const char* name, UnaryOp op, const Tensor& x, ops::ElementwiseParams p = {},
             std::optional<ScalarType> dtype = std::nullopt) {
  Tensor out =
      empty(x.sizes(), TensorOptions(dtype.value_or(result_dtype(name, op, x.dtype()))).device(x.device()));
  if (out.numel() > 0) unary_stub(x.device())(op, out, x, p);
  return out;
}

const Tensor& unary_(const char* name, UnaryOp op, const Tensor& x, ops::ElementwiseParams p = {}) {
  check_can_cast(name, result_dtype(name, op, x.dtype()), x.dtype());
  check_no_internal_overlap(name, x);
  if (x.numel() > 0) unary_stub(x.device())(op, x, x, p);
  x.bump_version();
  return x;
}

ops::ElementwiseParams clamp_params(const char* name, const std::optional<Scalar>& lo,
                                    const std::optional<Scalar>& hi) {
  EMBER_CHECK(lo || hi, name, ": at least one of 'min' or 'max' must not be None");
  return {lo ? lo->to_double() : NAN, hi ? hi->to_double() : NAN};
}

}  // namespace

Tensor neg(const Tensor& x) { return unary("neg", UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return unary("abs", UnaryOp::Abs, x); }
Tensor sign(const Tensor& x) { return unary("sign", UnaryOp::Sign, x); }
Tensor relu(const Tensor& x) { return unary("relu", UnaryOp::Relu, x); }
Tensor square(const Tensor& x) { return unary("square", UnaryOp::Square, x); }
Tensor exp(const Tensor& x) { return unary("exp", UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary("log", UnaryOp::Log, x); }
Tensor log1p(const Tensor& x) { return unary("log1p", UnaryOp::Log1p, x); }
Tensor expm1(const Tensor& x) { return unary("expm1", UnaryOp::Expm1, x); }
Tensor sqrt(const Tensor& x) { return unary("sqrt", UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary("rsqrt", UnaryOp::Rsqrt, x); }
Tensor sin(const Tensor& x) { return unary("sin", UnaryOp::Sin, x); }
Tensor cos(const Tensor& x) { return unary("cos", UnaryOp::Cos, x); }
Tensor tanh(const Tensor& x) { return unary("tanh", UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", UnaryOp::Sigmoid, x); }
Tensor silu(const Tensor& x) { return unary("silu", UnaryOp::Silu, x); }
Tensor reciprocal(const Tensor& x) { return unary("reciprocal", UnaryOp::Reciprocal, x); }
Tensor erf(const Tensor& x) { return unary("erf", UnaryOp::Erf, x); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return unary("gelu", approximate == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  EMBER_CHECK(beta != 0, "softplus: beta must be nonzero");
  return unary("softplus", UnaryOp::Softplus, x, {beta, threshold});
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return unary("leaky_relu", UnaryOp::LeakyRelu, x, {negative_slope});
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  bool float_bound = (min && min->is_floating_point()) || (max && max->is_floating_point());
  ScalarType dt = float_bound ? to_float_dtype(x.dtype()) : result_dtype("clamp", UnaryOp::Clamp, x.dtype());
  return unary("clamp", UnaryOp::Clamp, x, clamp_params("clamp", min, max), dt);
}

Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::sign() const { return ember::sign(*this); }
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
const Tensor& Tensor::neg_() const { return unary_("neg_", UnaryOp::Neg, *this); }
const Tensor& Tensor::exp_() const { return unary_("exp_", UnaryOp::Exp, *this); }
const Tensor& Tensor::sqrt_() const { return unary_("sqrt_", UnaryOp::Sqrt, *this); }
const Tensor& Tensor::relu_() const { return unary_("relu_", UnaryOp::Relu, *this); }
const Tensor& Tensor::tanh_() const { return unary_("tanh_", UnaryOp::Tanh, *this); }
const Tensor& Tensor::sigmoid_() const { return unary_("sigmoid_", UnaryOp::Sigmoid, *this); }
const Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return unary_("clamp_", UnaryOp::Clamp, *this, clamp_params("clamp_", min, max));
}

Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace ember
