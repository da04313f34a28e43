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

// out = (log_)softmax(in) along `dim`; both contiguous, same floating dtype and shape.
using SoftmaxFn = void (*)(const Tensor& out, const Tensor& in, int64_t dim, bool log);
extern DispatchStub<SoftmaxFn> softmax_stub;

}  // namespace ember
