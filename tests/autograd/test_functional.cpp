// autograd::functional (torch.autograd.functional) and func::grad against closed forms: linear maps
// (J = A), elementwise ones (J = diag), quadratic forms (H = A + A^T), inputs a function ignores,
// create_graph, nesting, and errors.
#include "ember/autograd/functional.h"
#include "test_util.h"

namespace ember::testing {
namespace {

namespace F = ember::autograd::functional;
using Inputs = std::vector<Tensor>;

Tensor a_matrix() { return tensor({{1.0, 2.0, 0.5}, {-1.0, 3.0, 4.0}}, kFloat64); }  // [2, 3]
Tensor x3() { return tensor({0.3, -1.2, 2.0}, kFloat64); }
Tensor identity(int64_t n) { return eye(n, std::nullopt, kFloat64); }
Tensor diag(const Tensor& v) { return identity(v.numel()) * v; }

TEST(AutogradFunctional, JacobianOfLinearAndElementwiseMaps) {
  const Tensor a = a_matrix(), x = x3();
  EXPECT_CLOSE(F::jacobian([&](const Tensor& v) { return a.matmul(v); }, x), a);
  EXPECT_CLOSE(F::jacobian([](const Tensor& v) { return v.sin(); }, x), diag(x.cos()));
  // Two inputs and one unused: d(p * q)/dp = diag(q), d/dq = diag(p), zeros for the third.
  const Tensor p = tensor({1.0, 2.0}, kFloat64), q = tensor({3.0, -4.0}, kFloat64);
  std::vector<Tensor> j =
      F::jacobian([](const Inputs& in) { return in[0] * in[1]; }, {p, q, ones({3}, kFloat64)});
  ASSERT_EQ(j.size(), 3u);
  EXPECT_CLOSE(j[0], diag(q));
  EXPECT_CLOSE(j[1], diag(p));
  EXPECT_EQ(j[2].sizes(), (IntArrayRef{2, 3}));
  EXPECT_EQ(j[2].abs().sum().item<double>(), 0.0);
  // Shapes: [output sizes, input sizes]; the inputs needed no requires_grad, the result is detached.
  const Tensor m = arange(6, kFloat64).view({2, 3});
  const Tensor jm = F::jacobian([](const Tensor& v) { return v.sum(0); }, m);
  EXPECT_EQ(jm.sizes(), (IntArrayRef{3, 2, 3}));
  EXPECT_EQ(jm[1][0][1].item<double>(), 1.0);
  EXPECT_EQ(jm[1][0][2].item<double>(), 0.0);
  EXPECT_FALSE(jm.requires_grad());
  EXPECT_FALSE(m.requires_grad());
}

TEST(AutogradFunctional, CreateGraphKeepsTheResultDifferentiable) {
  // J of x^3 is diag(3 x^2); the sum of J over x is 6 x.
  Tensor x = x3().requires_grad_();
  const Tensor j = F::jacobian([](const Tensor& v) { return v.pow(3); }, x, /*create_graph=*/true);
  EXPECT_TRUE(j.requires_grad());
  EXPECT_CLOSE(j, diag(3 * x.detach().pow(2)));
  j.sum().backward();
  EXPECT_CLOSE(x.grad(), 6 * x.detach());
  // Under no_grad the derivatives are still there.
  NoGradGuard no_grad;
  EXPECT_CLOSE(F::jacobian([](const Tensor& v) { return v.exp(); }, x3()), diag(x3().exp()));
}

TEST(AutogradFunctional, HessianOfQuadraticFormsAndProducts) {
  const Tensor a = tensor({{1.0, 2.0, 0.0}, {0.5, -1.0, 3.0}, {4.0, 0.0, 2.0}}, kFloat64), x = x3();
  auto quadratic = [&](const Tensor& v) { return dot(v, a.matmul(v)); };  // x^T A x
  EXPECT_CLOSE(F::hessian(quadratic, x), a + a.t());
  EXPECT_CLOSE(F::hessian([](const Tensor& v) { return v.pow(3).sum(); }, x), diag(6 * x));
  // Blocks: f = sum(p * q) has d2f/dp dq = I and nothing else.
  const Tensor p = tensor({1.0, 2.0}, kFloat64), q = tensor({3.0, -4.0}, kFloat64);
  auto h = F::hessian([](const Inputs& in) { return (in[0] * in[1]).sum(); }, {p, q});
  EXPECT_CLOSE(h[0][1], identity(2));
  EXPECT_CLOSE(h[1][0], identity(2));
  EXPECT_EQ(h[0][0].abs().sum().item<double>(), 0.0);
  // Vector products: v^T H and H v, both (A + A^T) v here; vjp is v^T J, jvp is J v.
  const Tensor v = tensor({1.0, -2.0, 0.5}, kFloat64);
  EXPECT_CLOSE(F::vhp([&](const Inputs& in) { return quadratic(in[0]); }, {x}, {v}).second[0],
               (a + a.t()).matmul(v));
  auto [value, hv] = F::hvp([&](const Inputs& in) { return quadratic(in[0]); }, {x}, {v});
  EXPECT_CLOSE(hv[0], (a + a.t()).matmul(v));
  EXPECT_CLOSE(value, quadratic(x));
  const Tensor b = a_matrix(), w = tensor({2.0, -1.0}, kFloat64);
  auto [y, vj] = F::vjp([&](const Tensor& t) { return b.matmul(t); }, x, w);
  EXPECT_CLOSE(y, b.matmul(x));
  EXPECT_CLOSE(vj, b.t().matmul(w));
  EXPECT_CLOSE(F::jvp([&](const Tensor& t) { return b.matmul(t); }, x, v).second, b.matmul(v));
  EXPECT_CLOSE(F::jvp([](const Tensor& t) { return t.sin(); }, x, v).second, x.cos() * v);
}

TEST(AutogradFunctional, FuncGradNests) {
  const Tensor x = x3();
  auto f = [](const Tensor& v) { return v.pow(3).sum(); };
  EXPECT_CLOSE(func::grad(f)(x), 3 * x.pow(2));
  // d/dx of sum(d f/dx) = 6 x: the inner gradient stays differentiable inside the outer one.
  EXPECT_CLOSE(func::grad([&](const Tensor& v) { return func::grad(f)(v).sum(); })(x), 6 * x);
}

TEST(AutogradFunctional, Errors) {
  const Tensor x = x3();
  EXPECT_EMBER_ERROR(F::hessian([](const Tensor& v) { return v * 2; }, x), "hessian",
                     "must return a tensor of one element", "[3]");
  EXPECT_EMBER_ERROR(F::vjp([](const Tensor& v) { return v * 2; }, x, ones({2}, kFloat64)),
                     "vjp: v has shape [2]", "output has shape [3]");
  EXPECT_EMBER_ERROR(F::jvp([](const Tensor& v) { return v * 2; }, x, ones({4}, kFloat64)),
                     "jvp: v[0] has shape [4]");
  EXPECT_EMBER_ERROR(F::jacobian([](const Tensor& v) { return v; }, tensor({1, 2})), "jacobian: input 0",
                     "floating point", "int64");
  EXPECT_EMBER_ERROR(func::grad([](const Tensor& v) { return v; })(x), "grad", "one element");
}

}  // namespace
}  // namespace ember::testing
