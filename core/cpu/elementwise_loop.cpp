#include "ember/core/cpu/elementwise_loop.h"

namespace ember::cpu {

ElementwiseIter::ElementwiseIter(std::initializer_list<Tensor> operands) {
  n_ = static_cast<int>(operands.size());
  const Tensor& out = *operands.begin();
  IntArrayRef shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  numel_ = out.numel();
  // Broadcast: right-align, stride 0 for missing or size-1 dims; dims of size 1 dropped.
  LoopDims dims;
  for (int d = 0; d < nd; ++d)
    if (shape[d] != 1) dims.push_back({shape[d], {}});
  int k = 0;
  for (const Tensor& t : operands) {
    data_[k] = static_cast<char*>(t.data_ptr());
    dtypes_[k] = t.dtype();
    const int off = nd - static_cast<int>(t.dim());
    const auto es = static_cast<int64_t>(t.element_size());
    for (int d = 0, j = 0; d < nd; ++d) {
      if (shape[d] == 1) continue;
      dims[j++].strides[k] = d < off || t.size(d - off) == 1 ? 0 : t.stride(d - off) * es;
    }
    ++k;
  }
  // Walked in the output's memory order, so an NHWC output with NHWC inputs is one run.
  coalesce_dims(dims, n_);
  DimVector sizes;
  std::array<DimVector, kMaxOperands> strides;
  for (const LoopDim& d : dims) {
    sizes.push_back(d.size);
    for (int j = 0; j < n_; ++j) strides[j].push_back(d.strides[j]);
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (int j = 0; j < n_; ++j) strides[j].push_back(0);
  }
  shape_ = sizes;
  strides_ = strides;
}

}  // namespace ember::cpu
