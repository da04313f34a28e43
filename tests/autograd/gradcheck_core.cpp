// Gradcheck cases for the elementwise ops, sum and mean, the matmul family, views and copies,
// cat and stack.
#include "test_util.h"

namespace ember::testing {
namespace {

auto un(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return f(x[0]); };
}

const GradcheckRegistrar registrar({
    {"neg", un(neg), {{3, 4}}},
    {"abs", un(abs), {{3, 4}}, 0.1, 2},
    {"relu", un(relu), {{3, 4}}, 0.1, 2},
    {"sign", un(sign), {{3, 4}}, 0.1, 2},
    // Within (0, 1) (and (0, 0.5) for round): no step between x and x +- eps.
    {"floor", un(floor), {{3, 4}}, 0.1, 0.9},
    {"ceil", un(ceil), {{3, 4}}, 0.1, 0.9},
    {"round", un(round), {{3, 4}}, 0.1, 0.4},
    {"trunc", un(trunc), {{3, 4}}, 0.1, 0.9},
    {"outer", [](const auto& x) { return outer(x[0], x[1]); }, {{3}, {4}}},
    {"dot", [](const auto& x) { return dot(x[0], x[1]); }, {{5}, {5}}, -2, 2, true},
    {"square", un(square), {{3, 4}}, -2, 2, true},
    {"exp", un(exp), {{3, 4}}, -2, 2, true},
    {"log", un(log), {{3, 4}}, 0.5, 3, true},
    {"log1p", un(log1p), {{3, 4}}, 0, 2},
    {"expm1", un(expm1), {{3, 4}}},
    {"sqrt", un(sqrt), {{3, 4}}, 0.5, 3, true},
    {"rsqrt", un(rsqrt), {{3, 4}}, 0.5, 3},
    {"sin", un(sin), {{3, 4}}, -2, 2, true},
    {"cos", un(cos), {{3, 4}}},
    {"tanh", un(tanh), {{3, 4}}, -2, 2, true},
    {"sigmoid", un(sigmoid), {{3, 4}}, -2, 2, true},
    {"silu", un(silu), {{3, 4}}},
    {"reciprocal", un(reciprocal), {{3, 4}}, 0.5, 2},
    {"erf", un(erf), {{3, 4}}},
    {"gelu", [](const auto& x) { return gelu(x[0]) + gelu(x[0], "tanh"); }, {{3, 4}}, -2, 2, true},
    {"gelu_backward",
     [](const auto& x) { return gelu_backward(x[0], x[1]) + gelu_backward(x[0], x[1], "tanh"); },
     {{3, 4}, {4}},
     -2,
     2,
     true},
    // Linear in the gradient, piecewise constant in self (values away from the threshold).
    {"threshold_backward",
     [](const auto& x) { return threshold_backward(x[0], x[1], 0.25); },
     {{3, 4}, {4}},
     -2,
     2,
     true},
    {"softplus", [](const auto& x) { return softplus(x[0], 2, 2); }, {{3, 4}}},
    {"leaky_relu", [](const auto& x) { return leaky_relu(x[0], 0.1); }, {{3, 4}}, 0.1, 2},
    {"clamp", [](const auto& x) { return clamp(x[0], -1.3, 1.1); }, {{3, 4}}},
    {"add", [](const auto& x) { return add(x[0], x[1], 0.5); }, {{3, 1}, {4}}},
    {"sub", [](const auto& x) { return x[0] - x[1] - 2.0; }, {{2, 3}, {3}}},
    {"mul", [](const auto& x) { return x[0] * x[1] * 3; }, {{3, 1}, {2, 1, 4}}, -2, 2, true},
    {"div", [](const auto& x) { return x[0] / x[1] + 1 / x[1]; }, {{3, 4}, {4}}, 0.5, 2, true},
    {"pow", [](const auto& x) { return pow(x[0], x[1]) + pow(x[0], 2.5); }, {{3, 4}, {3, 4}}, 0.5, 2},
    {"maximum", [](const auto& x) { return maximum(x[0], x[1]); }, {{3, 4}, {4}}},
    {"minimum", [](const auto& x) { return minimum(x[0], x[1]); }, {{3, 4}, {3, 1}}},
    {"where", [](const auto& x) { return where(x[0] > 0, x[0], x[1]); }, {{3, 4}, {4}}},
    {"masked_fill", [](const auto& x) { return masked_fill(x[0], x[0] > 0.5, 2.0); }, {{3, 4}}},
    {"addcmul",
     [](const auto& x) { return addcmul(x[0], x[1], x[2], 0.5); },
     {{3, 4}, {4}, {3, 1}},
     -2,
     2,
     true},
    {"addcdiv",
     [](const auto& x) { return addcdiv(x[0], x[1], x[2], -2); },
     {{3, 4}, {4}, {3, 1}},
     0.5,
     2,
     true},
    {"lerp",
     [](const auto& x) { return lerp(x[0], x[1], x[2]) + lerp(x[0], x[1], 0.75); },
     {{3, 4}, {3, 4}, {4}},
     -1,
     2,
     true},
    {"sum",
     [](const auto& x) {
       return x[0].sum({0, 2}, true) + x[0].sum();
     },
     {{2, 3, 2}}},
    {"mean", [](const auto& x) { return x[0].mean({1}) * x[0].mean(); }, {{2, 3, 2}}, -2, 2, true},
    {"matmul", [](const auto& x) { return x[0].matmul(x[1]); }, {{2, 3, 4}, {4, 5}}, -2, 2, true},
    {"matmul", [](const auto& x) { return x[0].matmul(x[1]); }, {{2, 1, 3, 4}, {3, 4, 2}}},
    {"matmul", [](const auto& x) { return x[0].matmul(x[1]) + x[1].matmul(x[1]); }, {{3, 4}, {4}}},
    {"mm", [](const auto& x) { return mm(x[0], x[1].t()); }, {{3, 4}, {5, 4}}},
    {"bmm", [](const auto& x) { return bmm(x[0], x[1]); }, {{2, 3, 4}, {2, 4, 2}}, -2, 2, true},
    // A column-major mat2 (a linear's weight.t()) gets its gradient computed transposed.
    {"bmm",
     [](const auto& x) { return bmm(x[0], x[1].transpose(1, 2)); },
     {{2, 3, 4}, {2, 2, 4}},
     -2,
     2,
     true},
    {"addmm", [](const auto& x) { return addmm(x[0], x[1], x[2].t()); }, {{3}, {2, 4}, {3, 4}}, -2, 2, true},
    {"addmm", [](const auto& x) { return addmm(x[0], x[1], x[2], 0.5, 2); }, {{3}, {2, 4}, {4, 3}}},
    {"baddbmm",
     [](const auto& x) { return baddbmm(x[0], x[1], x[2], 1, 0.5); },
     {{2, 1, 3}, {2, 2, 4}, {2, 4, 3}}},
    {"slice",
     [](const auto& x) { return x[0].slice(1, 1, 4, 2).select(0, 1) * x[0][0].narrow(0, 0, 2); },
     {{3, 5}},
     -2,
     2,
     true},
    {"view",
     [](const auto& x) {
       return x[0].t().reshape({2, 6}).slice(1, 1, 5, 2).unsqueeze(0).expand({3, 2, 2}).squeeze() +
              x[0].permute({1, 0}).flatten().view({2, 6})[1].narrow(0, 1, 2).sum();
     },
     {{3, 4}}},
    // (A float32 round trip is left to Autograd.ViewsAndCopiesAreDifferentiable: finite
    // differences of 1e-6 drown in float32 rounding.)
    {"clone", [](const auto& x) { return x[0].clone() * 2 + x[0].t().contiguous().t(); }, {{3, 4}}},
    {"cat",
     [](const auto& x) {
       return cat({x[0], x[1] * 2, x[0]}, 1);
     },
     {{2, 3}, {2, 1}},
     -2,
     2,
     true},
    // One node for all parts; a part left unused gets zeros.
    {"split",
     [](const auto& x) {
       std::vector<Tensor> p = x[0].chunk(3, 1);
       std::vector<Tensor> q = x[0].split({1, 3}, 0);
       return p[0] * p[2] + q[1].sum(0).narrow(0, 0, 2);
     },
     {{4, 6}},
     -2,
     2,
     true},
    {"stack",
     [](const auto& x) {
       return stack({x[0], x[1]}, 0);
     },
     {{2, 3}, {2, 3}}},
});

}  // namespace
}  // namespace ember::testing
