#pragma once

#include <functional>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::autograd {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares the analytical Jacobian (backward with one-hot output gradients) with central finite
// differences, for every input that requires grad. Inputs should be float64. Throws ember::Error
// naming the input and the worst element when they disagree, as torch.autograd.gradcheck does.
bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
               double rtol = 1e-3);

// gradcheck of the gradient itself: checks second derivatives through create_graph.
bool gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                   double atol = 1e-5, double rtol = 1e-3);

}  // namespace ember::autograd
