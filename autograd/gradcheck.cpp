#include "ember/autograd/gradcheck.h"

#include <cmath>

#include "ember/autograd/engine.h"
#include "ember/autograd/functional.h"
#include "ember/core/factories.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/random.h"

namespace ember::autograd {
namespace {

// The function's output flattened to float64 on the CPU. Grad mode stays on: fn may itself
// differentiate (gradgradcheck).
Tensor eval(const TensorFn& fn, const std::vector<Tensor>& inputs) {
  return fn(inputs).detach().to(kFloat64).cpu().contiguous().reshape({-1});
}

}  // namespace

bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    // A fresh graph per input: perturbing an earlier input moved the versions of its saved tensors.
    Tensor out = fn(inputs);
    int64_t n_out = out.numel();
    EMBER_CHECK(x.dtype() == kFloat64, "gradcheck: input ", k,
                " should be float64 for a meaningful check, got ", x.dtype());
    EMBER_CHECK(out.requires_grad(), "gradcheck: the output does not require grad (is the op recorded?)");
    const Tensor analytical = detail::jacobian_rows(out, x, false).to(kFloat64).cpu().contiguous();
    // Numerical Jacobian by central differences, one input element (column) at a time.
    Tensor numerical = zeros({n_out, x.numel()}, kFloat64);
    Tensor flat = x.detach().view({-1});  // inputs must be contiguous to be perturbed in place
    for (int64_t j = 0; j < x.numel(); ++j) {
      double orig = flat[j].item<double>();
      flat[j].fill_(orig + eps);
      Tensor plus = eval(fn, inputs);
      flat[j].fill_(orig - eps);
      Tensor minus = eval(fn, inputs);
      flat[j].fill_(orig);
      numerical.select(1, j).copy_((plus - minus) / (2 * eps));
    }
    const double* a = analytical.data_ptr<double>();
    const double* nu = numerical.data_ptr<double>();
    for (int64_t i = 0; i < analytical.numel(); ++i) {
      EMBER_CHECK(std::fabs(a[i] - nu[i]) <= atol + rtol * std::fabs(nu[i]),
                  "gradcheck: Jacobian mismatch for input ", k, " (shape ", x.sizes(), ") at output ",
                  i / x.numel(), ", input element ", i % x.numel(), ": analytical ", a[i], ", numerical ",
                  nu[i]);
    }
  }
  return true;
}

bool gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                   double rtol) {
  Tensor out = fn(inputs);
  // Fixed random output gradients, themselves differentiable, as torch's gradgradcheck.
  Generator gen(0);
  Tensor go = randn(out.sizes(), TensorOptions(kFloat64), &gen).requires_grad_();
  // f(x..., go) = the first derivatives, flattened: its Jacobian holds the second derivatives.
  auto first_grads = [&](const std::vector<Tensor>& args) {
    std::vector<Tensor> xs(args.begin(), args.end() - 1);
    Tensor y = fn(xs);
    std::vector<Tensor> diff;
    for (const Tensor& x : xs)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    std::vector<Tensor> g = grad({y}, diff, {args.back()}, true, /*create_graph=*/true, true);
    std::vector<Tensor> parts;
    for (const Tensor& t : g)
      if (t.defined()) parts.push_back(t.reshape({-1}));
    return cat(parts);
  };
  std::vector<Tensor> args = inputs;
  args.push_back(go);
  return gradcheck(first_grads, args, eps, atol, rtol);
}

}  // namespace ember::autograd
