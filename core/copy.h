#pragma once

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// dst[...] = src[...] with src broadcast to dst's shape and cast to its dtype. A copy between
// devices goes to the non-CPU device's kernel.
using CopyFn = void (*)(const Tensor& dst, const Tensor& src, bool non_blocking);
extern DispatchStub<CopyFn> copy_stub;

using FillFn = void (*)(const Tensor& dst, const Scalar& value);
extern DispatchStub<FillFn> fill_stub;

// Throws naming `op` when `t` has elements that alias one another (an expanded tensor), which
// an in-place write would make ambiguous.
void check_no_internal_overlap(const char* op, const Tensor& t);

// Throws naming `op` when an op that writes `out` reads `in` and the two share memory without
// being the same elements in the same layout (x.slice(0, 1).add_(x.slice(0, 0, 5)) would read
// values it has already overwritten). As PyTorch, only dense tensors are compared; others pass.
void check_no_partial_overlap(const char* op, const Tensor& out, const Tensor& in);

}  // namespace ember
