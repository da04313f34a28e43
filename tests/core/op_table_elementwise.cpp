// Op-table entries for the elementwise family (core/ops/elementwise.h).
#include "test_util.h"

namespace ember::testing {
namespace {

OpEntry unary(const std::string& name, std::function<Tensor(const Tensor&)> f, double low = -2,
              double high = 2) {
  return {name, [=](ScalarType dt) { return samples_from_shapes(dt, unary_shapes(), low, high); },
          [f](const std::vector<Tensor>& in) { return f(in[0]); }};
}

OpEntry binary(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f,
               double low = -2, double high = 2) {
  return {name, [=](ScalarType dt) { return samples_from_shapes(dt, binary_shapes(), low, high); },
          [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); }};
}

OpEntry ternary(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f,
                double low = -2, double high = 2) {
  const std::vector<std::vector<DimVector>> shapes = {{{3, 4}, {3, 4}, {3, 4}}, {{2, 1, 4}, {3, 1}, {4}}};
  return {name, [=](ScalarType dt) { return samples_from_shapes(dt, shapes, low, high); },
          [f](const std::vector<Tensor>& in) { return f(in[0], in[1], in[2]); }};
}

const OpTableRegistrar registrar({
    unary("neg", [](const Tensor& x) { return -x; }),
    unary("abs", [](const Tensor& x) { return abs(x); }),
    unary("sign", [](const Tensor& x) { return sign(x); }),
    unary("relu", [](const Tensor& x) { return relu(x); }),
    unary("square", [](const Tensor& x) { return square(x); }),
    unary("clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.75); }),
    unary("exp", [](const Tensor& x) { return exp(x); }),
    unary(
        "log", [](const Tensor& x) { return log(x); }, 0.1, 4),
    unary(
        "log1p", [](const Tensor& x) { return log1p(x); }, -0.9, 4),
    unary("expm1", [](const Tensor& x) { return expm1(x); }),
    unary(
        "sqrt", [](const Tensor& x) { return sqrt(x); }, 0, 4),
    unary(
        "rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.1, 4),
    unary("sin", [](const Tensor& x) { return sin(x); }),
    unary("cos", [](const Tensor& x) { return cos(x); }),
    unary("tanh", [](const Tensor& x) { return tanh(x); }),
    unary("sigmoid", [](const Tensor& x) { return sigmoid(x); }),
    unary("gelu", [](const Tensor& x) { return gelu(x) + gelu(x, "tanh"); }),
    unary("silu", [](const Tensor& x) { return silu(x); }),
    unary("softplus", [](const Tensor& x) { return softplus(x, 2, 3); }),
    unary("leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }),
    unary(
        "reciprocal", [](const Tensor& x) { return reciprocal(x); }, 0.5, 4),
    unary("erf", [](const Tensor& x) { return erf(x); }),
    unary("floor", [](const Tensor& x) { return floor(x); }),
    unary("ceil", [](const Tensor& x) { return ceil(x); }),
    unary("round", [](const Tensor& x) { return round(x); }),
    unary("trunc", [](const Tensor& x) { return trunc(x); }),
    binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2); }),
    binary("sub", [](const Tensor& a, const Tensor& b) { return a - b; }),
    binary("mul", [](const Tensor& a, const Tensor& b) { return a * b; }),
    // The erf form only: the tanh form is a composite of a dozen ops, each rounding in f16 and bf16
    // (the gradcheck covers it in float64).
    binary("gelu_backward", [](const Tensor& g, const Tensor& x) { return gelu_backward(g, x); }),
    binary("threshold_backward",
           [](const Tensor& g, const Tensor& x) { return threshold_backward(g, x, 0.5); }),
    binary(
        "div", [](const Tensor& a, const Tensor& b) { return a / b; }, 0.5, 3),
    binary(
        "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2),
    binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }),
    binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }),
    binary("eq", [](const Tensor& a, const Tensor& b) { return eq(a.clamp(-1, 1), b.clamp(-1, 1)); }),
    binary("ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }),
    binary("lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }),
    binary("le", [](const Tensor& a, const Tensor& b) { return le(a, b); }),
    binary("gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }),
    binary("ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }),
    binary("logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a > 0, b > 0); }),
    binary("logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a > 0, b > 0); }),
    binary("logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(a > 0, b > 0); }),
    unary("logical_not", [](const Tensor& x) { return logical_not(x > 0); }),
    binary("where", [](const Tensor& a, const Tensor& b) { return where(a > b, a, b * 3); }),
    binary("masked_fill", [](const Tensor& a, const Tensor& b) { return masked_fill(a, b > 0.5, -7.5); }),
    ternary("addcmul",
            [](const Tensor& a, const Tensor& b, const Tensor& c) { return addcmul(a, b, c, 0.5); }),
    ternary(
        "addcdiv", [](const Tensor& a, const Tensor& b, const Tensor& c) { return addcdiv(a, b, c, 2); }, 0.5,
        2),
    ternary(
        "lerp", [](const Tensor& a, const Tensor& b, const Tensor& c) { return lerp(a, b, c); }, -1, 2),
});

}  // namespace
}  // namespace ember::testing
