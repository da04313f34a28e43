#include "ember/core/cpu/elementwise_loop.h"

namespace ember::cpu {

ElementwiseIter::ElementwiseIter(std::initializer_list<Tensor> operands) {
  n_ = static_cast<int>(operands.size());
  const Tensor& out = *operands.begin();
  IntArrayRef shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  numel_ = out.numel();
  int k = 0;
  DimVector full_strides[kMaxOperands];
  for (const Tensor& t : operands) {
    data_[k] = static_cast<char*>(t.data_ptr());
    dtypes_[k] = t.dtype();
    // Broadcast: right-align, stride 0 for missing or size-1 dims.
    full_strides[k] = DimVector(nd, 0);
    int off = nd - static_cast<int>(t.dim());
    auto es = static_cast<int64_t>(t.element_size());
    for (int d = 0; d < t.dim(); ++d)
      full_strides[k][off + d] = (t.size(d) == 1 && shape[off + d] != 1) ? 0 : t.stride(d) * es;
    ++k;
  }
  // Coalesce adjacent dims that every operand walks as one, and drop size-1 dims.
  DimVector sizes;
  std::array<DimVector, kMaxOperands> strides;
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int j = 0; j < n_ && merge; ++j) merge = strides[j].back() == full_strides[j][d] * shape[d];
    if (merge) {
      sizes.back() *= shape[d];
      for (int j = 0; j < n_; ++j) strides[j].back() = full_strides[j][d];
    } else {
      sizes.push_back(shape[d]);
      for (int j = 0; j < n_; ++j) strides[j].push_back(full_strides[j][d]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (int j = 0; j < n_; ++j) strides[j].push_back(0);
  }
  shape_ = sizes;
  strides_ = strides;
}

}  // namespace ember::cpu
