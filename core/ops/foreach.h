#pragma once

// Ops over lists of tensors (PyTorch's torch._foreach_*): on CUDA, one multi-tensor kernel launch
// per device and dtype instead of one launch per tensor.

#include "ember/core/array_ref.h"
#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// self[i].copy_(src[i]) for every i (torch._foreach_copy_), in place: src[i] cast to self[i]'s
// dtype and moved to its device as copy_ does. Unlike PyTorch, src[i] must have self[i]'s shape
// (no broadcasting). Pairs of one device and dtype, both contiguous, take the multi-tensor kernel;
// the others go through copy_ one by one.
void _foreach_copy_(ArrayRef<Tensor> self, ArrayRef<Tensor> src);

// The kernel sees non-empty lists of one device and dtype, contiguous, pairwise of one shape,
// without zero-size tensors.
using ForeachCopyFn = void (*)(ArrayRef<Tensor> self, ArrayRef<Tensor> src);
extern DispatchStub<ForeachCopyFn> foreach_copy_stub;

}  // namespace ember
