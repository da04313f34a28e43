#pragma once

// softmax and log_softmax along one dim (x.softmax(dim) calls these).

#include <optional>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// `dtype`, when given, is the dtype x is cast to before the op (and so the result's dtype), as in
// PyTorch; integer inputs need it.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);

// The gradient reaching softmax's (log_softmax's) input from grad_output and the forward's
// output, along dim: output * (grad_output - sum(grad_output * output)) and
// grad_output - exp(output) * sum(grad_output), returned in input_dtype (PyTorch's ops of these
// names). One fused kernel; differentiable again.
Tensor _softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                              ScalarType input_dtype);
Tensor _log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                                  ScalarType input_dtype);

// out = (log_)softmax(in) along `dim`; both contiguous, same floating dtype and shape.
using SoftmaxFn = void (*)(const Tensor& out, const Tensor& in, int64_t dim, bool log);
// grad_in = the (log_)softmax backward of grad_out and out along `dim`; all contiguous, same
// floating dtype and shape.
using SoftmaxBackwardFn = void (*)(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                                   int64_t dim, bool log);
extern DispatchStub<SoftmaxFn> softmax_stub;
extern DispatchStub<SoftmaxBackwardFn> softmax_backward_stub;

}  // namespace ember
