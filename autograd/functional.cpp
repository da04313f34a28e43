#include "ember/autograd/functional.h"

#include "ember/autograd/engine.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"

namespace ember::autograd {

namespace detail {

Tensor jacobian_rows(const Tensor& out, const Tensor& x, bool create_graph) {
  const int64_t n = out.numel();
  if (n == 0 || !out.requires_grad()) return zeros({n, x.numel()}, x.options());
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < n; ++i) {
    Tensor go = zeros({n}, out.options());
    go[i].fill_(1);
    const Tensor g = grad({out}, {x}, {go.view(out.sizes())}, /*retain_graph=*/true, create_graph, true)[0];
    rows.push_back(g.defined() ? g.reshape({-1}) : zeros({x.numel()}, x.options()));
  }
  return stack(rows, 0);
}

}  // namespace detail

namespace functional {
namespace {

// What f runs on: a view of each input that requires grad when the results must reach it
// (create_graph), else a detached copy that requires grad.
std::vector<Tensor> prepared(const char* who, const std::vector<Tensor>& inputs, bool create_graph) {
  std::vector<Tensor> xs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    EMBER_CHECK(x.defined() && x.is_floating_point(), who, ": input ", k,
                " must be a floating point tensor, got ",
                x.defined() ? to_string(x.dtype()) : std::string("an undefined one"));
    xs.push_back(create_graph && x.requires_grad() ? x.view_as(x) : x.detach().requires_grad_());
  }
  return xs;
}

Tensor evaluated(const char* who, const TensorFn& f, const std::vector<Tensor>& xs) {
  Tensor out = f(xs);
  EMBER_CHECK(out.defined(), who, ": the function returned an undefined tensor");
  return out;
}

Tensor scalar_output(const char* who, const TensorFn& f, const std::vector<Tensor>& xs) {
  Tensor out = evaluated(who, f, xs);
  EMBER_CHECK(out.numel() == 1, who, ": the function must return a tensor of one element, got shape ",
              out.sizes());
  return out;
}

// d (out . go) / d xs (go undefined for one element), zeros where out does not depend on an input.
std::vector<Tensor> gradients(const Tensor& out, const std::vector<Tensor>& xs, const Tensor& go,
                              bool create_graph) {
  std::vector<Tensor> g(xs.size());
  if (out.requires_grad())
    g = grad({out}, xs, go.defined() ? std::vector<Tensor>{go} : std::vector<Tensor>{}, /*retain_graph=*/true,
             create_graph, /*allow_unused=*/true);
  for (size_t k = 0; k < g.size(); ++k)
    if (!g[k].defined()) g[k] = zeros_like(xs[k]);
  return g;
}

void check_like(const char* who, const std::vector<Tensor>& v, const std::vector<Tensor>& xs) {
  EMBER_CHECK(v.size() == xs.size(), who, ": expected one v per input (", xs.size(), "), got ", v.size());
  for (size_t k = 0; k < v.size(); ++k)
    EMBER_CHECK(v[k].defined() && v[k].sizes() == xs[k].sizes(), who, ": v[", k, "] has shape ",
                v[k].defined() ? v[k].sizes() : IntArrayRef{}, " but input ", k, " has shape ",
                xs[k].sizes());
}

// f's inputs as it ran on them (v, when given, checked against them), its one-element output, and
// the output's gradients (differentiable when grads_graph).
struct FirstDerivatives {
  std::vector<Tensor> xs;
  Tensor out;
  std::vector<Tensor> g;
};
FirstDerivatives first_derivatives(const char* who, const TensorFn& f, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>* v, bool create_graph, bool grads_graph) {
  FirstDerivatives d;
  d.xs = prepared(who, inputs, create_graph);
  if (v) check_like(who, *v, d.xs);
  d.out = scalar_output(who, f, d.xs);
  d.g = gradients(d.out, d.xs, Tensor(), grads_graph);
  return d;
}

// d (sum_k ys[k] . vs[k]) / d wrt, over the ys that depend on something; zeros where nothing does.
std::vector<Tensor> products(const std::vector<Tensor>& ys, const std::vector<Tensor>& vs,
                             const std::vector<Tensor>& wrt, bool create_graph) {
  std::vector<Tensor> outs, gos;
  for (size_t k = 0; k < ys.size(); ++k)
    if (ys[k].requires_grad()) outs.push_back(ys[k]), gos.push_back(vs[k]);
  std::vector<Tensor> g(wrt.size());
  if (!outs.empty()) g = grad(outs, wrt, gos, /*retain_graph=*/true, create_graph, /*allow_unused=*/true);
  for (size_t k = 0; k < g.size(); ++k)
    if (!g[k].defined()) g[k] = zeros_like(wrt[k]);
  return g;
}

Tensor result(const Tensor& t, bool create_graph) { return create_graph ? t : t.detach(); }
std::vector<Tensor> results(std::vector<Tensor> ts, bool create_graph) {
  for (Tensor& t : ts) t = result(t, create_graph);
  return ts;
}

DimVector joined(IntArrayRef a, IntArrayRef b) {
  DimVector s(a);
  for (int64_t d : b) s.push_back(d);
  return s;
}

TensorFn on_first(const UnaryFn& f) {
  return [f](const std::vector<Tensor>& xs) { return f(xs[0]); };
}

}  // namespace

std::vector<Tensor> jacobian(const TensorFn& f, const std::vector<Tensor>& inputs, bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const std::vector<Tensor> xs = prepared("jacobian", inputs, create_graph);
  const Tensor out = evaluated("jacobian", f, xs);
  std::vector<Tensor> jac;
  for (const Tensor& x : xs)
    jac.push_back(detail::jacobian_rows(out, x, create_graph).view(joined(out.sizes(), x.sizes())));
  return results(std::move(jac), create_graph);
}

Tensor jacobian(const UnaryFn& f, const Tensor& x, bool create_graph) {
  return jacobian(on_first(f), {x}, create_graph)[0];
}

std::vector<std::vector<Tensor>> hessian(const TensorFn& f, const std::vector<Tensor>& inputs,
                                         bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const auto [xs, out, g] = first_derivatives("hessian", f, inputs, nullptr, create_graph, true);
  std::vector<std::vector<Tensor>> h(xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    for (const Tensor& x : xs)
      h[i].push_back(result(
          detail::jacobian_rows(g[i], x, create_graph).view(joined(xs[i].sizes(), x.sizes())), create_graph));
  return h;
}

Tensor hessian(const UnaryFn& f, const Tensor& x, bool create_graph) {
  return hessian(on_first(f), {x}, create_graph)[0][0];
}

std::pair<Tensor, std::vector<Tensor>> vjp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const Tensor& v, bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const std::vector<Tensor> xs = prepared("vjp", inputs, create_graph);
  const Tensor out = evaluated("vjp", f, xs);
  EMBER_CHECK(v.defined() && v.sizes() == out.sizes(), "vjp: v has shape ",
              v.defined() ? v.sizes() : IntArrayRef{}, " but the function's output has shape ", out.sizes());
  return {result(out, create_graph), results(gradients(out, xs, v, create_graph), create_graph)};
}

std::pair<Tensor, Tensor> vjp(const UnaryFn& f, const Tensor& x, const Tensor& v, bool create_graph) {
  auto [out, g] = vjp(on_first(f), {x}, v, create_graph);
  return {out, g[0]};
}

std::pair<Tensor, Tensor> jvp(const TensorFn& f, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& v, bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const std::vector<Tensor> xs = prepared("jvp", inputs, create_graph);
  check_like("jvp", v, xs);
  const Tensor out = evaluated("jvp", f, xs);
  // J^T u is linear in u; its derivative along v in u's space is J v.
  const Tensor u = zeros_like(out).requires_grad_();
  const std::vector<Tensor> jtu = gradients(out, xs, u, /*create_graph=*/true);
  return {result(out, create_graph), result(products(jtu, v, {u}, create_graph)[0], create_graph)};
}

std::pair<Tensor, Tensor> jvp(const UnaryFn& f, const Tensor& x, const Tensor& v, bool create_graph) {
  return jvp(on_first(f), {x}, {v}, create_graph);
}

std::pair<Tensor, std::vector<Tensor>> vhp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v, bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const auto [xs, out, g] = first_derivatives("vhp", f, inputs, &v, create_graph, true);
  return {result(out, create_graph), results(products(g, v, xs, create_graph), create_graph)};
}

std::pair<Tensor, std::vector<Tensor>> hvp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v, bool create_graph) {
  EnableGradGuard grad_mode;  // as PyTorch's: the derivatives need the graph even under no_grad
  const auto [xs, out, g] = first_derivatives("hvp", f, inputs, &v, create_graph, true);
  // H^T u, linear in u; its derivative along v in u's space is H v.
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(zeros_like(x).requires_grad_());
  const std::vector<Tensor> htu = products(g, u, xs, /*create_graph=*/true);
  return {result(out, create_graph), results(products(htu, v, u, create_graph), create_graph)};
}

}  // namespace functional
}  // namespace ember::autograd

namespace ember::func {

autograd::functional::UnaryFn grad(autograd::functional::UnaryFn f) {
  using namespace autograd::functional;
  return [f = std::move(f)](const Tensor& x) {
    // Inside another transform (x requires grad), the gradient stays differentiable.
    const bool nested = x.requires_grad() && GradMode::is_enabled();
    EnableGradGuard grad_mode;
    return result(first_derivatives("grad", on_first(f), {x}, nullptr, nested, nested).g[0], nested);
  };
}

}  // namespace ember::func
