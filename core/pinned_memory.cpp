// Tensor::pin_memory and is_pinned: core asks the pinned allocator the CUDA layer installed.
#include "ember/core/autograd_meta.h"
#include "ember/core/grad_mode.h"
#include "ember/core/shape.h"
#include "ember/core/tensor.h"

namespace ember {

bool Tensor::is_pinned() const {
  const PinnedAllocator* a = get_pinned_allocator();
  return a && is_cpu() && a->is_pinned(impl().storage()->data());
}

Tensor Tensor::pin_memory() const {
  PinnedAllocator* a = get_pinned_allocator();
  EMBER_CHECK(a, "pin_memory: ember was built without CUDA");
  EMBER_CHECK(is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on ", device());
  if (is_pinned()) return *this;
  Storage storage = Storage::make(a->allocate(nbytes()), nbytes());
  Tensor out(IntrusivePtr<TensorImpl>::make(storage, dtype(), sizes(), contiguous_strides(sizes()), 0));
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  // Differentiable like clone: the gradient passes through unchanged.
  if (needs_grad({*this}))
    record("pin_memory", {*this}, {out},
           [](const GradContext& g) -> std::vector<Tensor> { return {g.grad()}; });
  return out;
}

}  // namespace ember
