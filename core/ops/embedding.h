#pragma once

// embedding: rows of a lookup table picked by integer indices.

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// weight is (num_embeddings, embedding_dim); indices (int64 or int32, any shape) give an output
// of shape indices.shape + (embedding_dim). Every index must lie in [0, num_embeddings).
// padding_idx (-1: none, as aten::embedding) marks the row whose gradient stays zero; it does
// not change the forward.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

// out [n, D] = weight[indices[i]] for contiguous indices [n]; weight rows are contiguous (row
// stride weight.stride(0)). Throws for an index out of range before writing anything.
using EmbeddingFn = void (*)(const Tensor& out, const Tensor& weight, const Tensor& indices);
extern DispatchStub<EmbeddingFn> embedding_stub;

}  // namespace ember
