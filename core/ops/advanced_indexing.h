#pragma once

// Indexing with tensors, PyTorch's "advanced indexing": x.index({mask}) is x[mask],
// x.index({Slice(), idx}) is x[:, idx], x.index_put_({mask}, 0) is x[mask] = 0.
//
// Integers, slices, None and Ellipsis act first, as views (an integer selects, as in PyTorch, and is
// not an index tensor as in NumPy). The index tensors then pick elements of that view: int64 or
// int32 ones (negative values count from the end) broadcast to one shape B; a bool (or uint8) mask
// over k dims stands for the k index tensors of its nonzero(), so it waits for the GPU once, as in
// PyTorch. The dims the tensors index are replaced by B: where the first of them was when they are
// adjacent, else at the front. The result is a copy, differentiable in x. index_put_ writes in
// place; on a tensor of a graph it is recorded as one op (not on a leaf that requires grad, nor on
// a view of a tensor with history, which ember's in-place ops refuse).
//
// Tensor::index, Tensor::index_put_ and Tensor::index_put are defined here.

#include "ember/core/tensor.h"

namespace ember {

// torch.index_put: a copy of x with values (broadcast to the indexed shape, cast to x's dtype)
// written where the index tensors pick, or added when accumulate (repeated indices add up).
// `indices` index x's leading dims; an undefined tensor among them takes its whole dim, as None
// does in PyTorch. Differentiable in x and values. Without accumulate, which of repeated indices'
// values lands is unspecified, as in PyTorch.
Tensor index_put(const Tensor& x, ArrayRef<Tensor> indices, const Tensor& values, bool accumulate = false);

}  // namespace ember
