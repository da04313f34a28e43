#pragma once

// Pointwise ops of three tensors, with PyTorch's names and broadcasting: addcmul and addcdiv (the
// optimizers' building blocks in hand-written update rules) and lerp (EMA weights). Each is one
// differentiable op over the elementwise kernels; the in-place forms write into their first
// tensor, which must already have the broadcast shape.

#include "ember/core/tensor.h"

namespace ember {

// input + value * tensor1 * tensor2.
Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1);
// input + value * tensor1 / tensor2 (true division; two integer tensors are refused, as PyTorch).
Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1);
// start + weight * (end - start), as end - (end - start) * (1 - weight) where |weight| >= 0.5 (so
// weight 1 gives end exactly, as PyTorch); start and end of one floating dtype.
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);

}  // namespace ember
