#include "ember/core/tensor_impl.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/error.h"
#include "ember/core/shape.h"

namespace ember {

namespace detail {
constinit std::atomic<MemoryHook> g_memory_hook{nullptr};
}

Storage make_storage(size_t nbytes, Device device) {
  DataPtr p = get_allocator(device.type)->allocate_on(nbytes, device.index);
  if (nbytes > 0)
    if (detail::MemoryHook hook = detail::g_memory_hook.load(std::memory_order_acquire))
      hook(p.ptr, static_cast<int64_t>(nbytes), p.device);
  return Storage::make(p, nbytes, true);
}

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                       int64_t offset)
    : storage_(std::move(storage)), sizes_(sizes), strides_(strides), offset_(offset), dtype_(dtype) {
  refresh();
}

TensorImpl::~TensorImpl() = default;

void TensorImpl::set_autograd_meta(std::unique_ptr<AutogradMeta> m) { autograd_meta_ = std::move(m); }

void TensorImpl::set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  sizes_ = DimVector(sizes);
  strides_ = DimVector(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::set_data(const TensorImpl& src) {
  if (autograd_meta_) autograd_meta_->kept_cast = {};  // a cast of the old data
  storage_ = src.storage_;
  dtype_ = src.dtype_;
  set_geometry(src.sizes(), src.strides(), src.offset_);
}

void TensorImpl::refresh() {
  // The ops that make geometry check their counts (shape.h's checked_*); this is the last guard.
  numel_ = checked_numel("TensorImpl", sizes_);
  // Contiguous as PyTorch defines it: row-major strides, ignoring dims of size 1.
  is_contiguous_ = true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) {
      is_contiguous_ = numel_ == 0;
      break;
    }
    expected *= sizes_[d];
  }
}

}  // namespace ember
