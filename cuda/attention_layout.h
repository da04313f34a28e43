#pragma once

// How the fused attention kernels (cuDNN's, ember's short-sequence one) lay out what they write:
// the output dense in the query's dims order, so that merging heads after attention is a view, and
// the gradients of q, k and v in one block when the three are chunks of one projection.

#include <array>

#include "ember/core/tensor.h"

namespace ember::cuda {

// Uninitialized, dense, with the dims ordered as `like`'s strides order them: the output of q
// [B, L, H, E] viewed as [B, H, L, E] is then [B, L, H, Ev] in memory.
Tensor empty_like_dense(IntArrayRef sizes, const Tensor& like, ScalarType dtype);

// Rows of 16 bytes that start 16-byte aligned: a unit-stride last dim, an aligned pointer, and the
// other strides in whole 16-byte vectors (8 elements of a 2-byte dtype).
bool rows_aligned(const Tensor& t);

// Whether q, k and v (4-D) are chunks of one projection ([B, L, 3, H, E] from a [B, L, 3 H E]
// linear): one storage, the same sizes and strides, k and v at equal steps after q, the block
// dense. Their gradients can then fill one block laid out the same way, which the chunking's
// backward takes as it is instead of concatenating (core/views.cpp).
bool qkv_packed(const Tensor& q, const Tensor& k, const Tensor& v);

// Uninitialized dq, dk, dv: views of one such block when `packed`, else each dense like its input.
std::array<Tensor, 3> empty_qkv_grads(const Tensor& q, const Tensor& k, const Tensor& v, bool packed);

}  // namespace ember::cuda
