#pragma once

// Selection by value: nonzero (torch.nonzero, torch.argwhere) and masked_select. The output's
// size depends on the data, so on CUDA they wait for the GPU once to learn it, as PyTorch's do.
// Tensor::nonzero and Tensor::masked_select call these.

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// The coordinates of x's nonzero elements (true for bool, NaN counts as nonzero), in row-major
// order: int64 [n, x.dim()].
Tensor nonzero(const Tensor& x);
Tensor argwhere(const Tensor& x);
// x's elements where mask (bool) is true, x and mask broadcast against each other, in row-major
// order: 1-D. Differentiable in x.
Tensor masked_select(const Tensor& x, const Tensor& mask);

// The kernel: out [n, sizes.size()] gets the coordinates of each element i of a row-major tensor
// of `sizes` whose running count (inclusive, int64 [numel]) steps up at i, in row count[i] - 1.
using NonzeroFn = void (*)(const Tensor& out, const Tensor& count, IntArrayRef sizes);
extern DispatchStub<NonzeroFn> nonzero_stub;

}  // namespace ember
