#pragma once

// Derivatives of functions (torch.autograd.functional, and torch.func.grad): Jacobians, Hessians,
// and their products with vectors, by reverse mode. Each function runs `f` on detached copies of
// the inputs that require grad, so the inputs need not require grad themselves; the results are
// detached unless create_graph, in which case they stay differentiable, back to the inputs that
// require grad (higher derivatives). An input the output does not depend on gets zeros, as with
// strict=False.
//
//   Tensor J = autograd::functional::jacobian([](const Tensor& x) { return x.sin(); }, x);
//   // J = diag(cos(x)), of shape [x's sizes, x's sizes]

#include <functional>
#include <utility>
#include <vector>

#include "ember/autograd/gradcheck.h"

namespace ember::autograd {

namespace detail {
// d out / d x as [out.numel(), x.numel()] rows, one backward per output element (the graph is kept);
// zero rows where out does not depend on x. create_graph keeps them differentiable.
Tensor jacobian_rows(const Tensor& out, const Tensor& x, bool create_graph);
}  // namespace detail

namespace functional {

using UnaryFn = std::function<Tensor(const Tensor&)>;

// d f / d inputs[k], for each k, of shape [f's sizes, inputs[k]'s sizes].
std::vector<Tensor> jacobian(const TensorFn& f, const std::vector<Tensor>& inputs, bool create_graph = false);
Tensor jacobian(const UnaryFn& f, const Tensor& x, bool create_graph = false);

// The second derivatives of a function with one element: block [i][j] = d2 f / d inputs[i] d inputs[j],
// of shape [inputs[i]'s sizes, inputs[j]'s sizes].
std::vector<std::vector<Tensor>> hessian(const TensorFn& f, const std::vector<Tensor>& inputs,
                                         bool create_graph = false);
Tensor hessian(const UnaryFn& f, const Tensor& x, bool create_graph = false);

// (f(inputs), v^T J): v is like f's output; one product per input.
std::pair<Tensor, std::vector<Tensor>> vjp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const Tensor& v, bool create_graph = false);
std::pair<Tensor, Tensor> vjp(const UnaryFn& f, const Tensor& x, const Tensor& v, bool create_graph = false);

// (f(inputs), J v): v has one tensor per input, like it; the sum of the inputs' products. By the
// double-backward trick (reverse mode twice), as PyTorch's.
std::pair<Tensor, Tensor> jvp(const TensorFn& f, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& v, bool create_graph = false);
std::pair<Tensor, Tensor> jvp(const UnaryFn& f, const Tensor& x, const Tensor& v, bool create_graph = false);

// For f with one element: (f(inputs), v^T H) and (f(inputs), H v), one product per input; v has one
// tensor per input. vhp is one backward through the gradient; hvp reverses twice more, exact even
// where the Hessian is not symmetric, as PyTorch's.
std::pair<Tensor, std::vector<Tensor>> vhp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v, bool create_graph = false);
std::pair<Tensor, std::vector<Tensor>> hvp(const TensorFn& f, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v, bool create_graph = false);

}  // namespace functional
}  // namespace ember::autograd

namespace ember::func {

// torch.func.grad: the function x -> d f(x) / d x, for f with one element.
autograd::functional::UnaryFn grad(autograd::functional::UnaryFn f);

}  // namespace ember::func
