#pragma once

#include <memory>

#include "ember/core/dtype.h"
#include "ember/core/small_vector.h"
#include "ember/core/storage.h"

namespace ember {

// Per-tensor autograd state (core/autograd_meta.h); null for tensors that never took part.
struct AutogradMeta;

// The shared state behind a Tensor handle: a view of `storage` through sizes, strides (in
// elements) and an offset. Always fully formed: it has a dtype and a storage from birth.
class TensorImpl : public IntrusiveTarget {
 public:
  TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides, int64_t offset);
  ~TensorImpl() override;

  const Storage& storage() const { return storage_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  bool is_contiguous() const { return is_contiguous_; }
  void* data() const {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  // Re-points this impl at new geometry over the same storage (in-place views like squeeze_).
  void set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t offset);
  // Takes src's storage, dtype and geometry (Tensor::set_data); autograd state stays.
  void set_data(const TensorImpl& src);

  AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMeta> m);

 private:
  void refresh();

  Storage storage_;
  DimVector sizes_;
  DimVector strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  ScalarType dtype_;
  bool is_contiguous_ = true;
  std::unique_ptr<AutogradMeta> autograd_meta_;
};

}  // namespace ember
