#include "ember/cuda/attention_layout.h"

#include <utility>

#include "ember/core/factories.h"
#include "ember/core/memory_format.h"

namespace ember::cuda {

namespace {

// [3, q's sizes] with q's strides after the step from q to k: the block q, k and v span.
std::pair<DimVector, DimVector> block_of(const Tensor& q, const Tensor& k) {
  DimVector sizes{3}, strides{k.storage_offset() - q.storage_offset()};
  for (int64_t d = 0; d < q.dim(); ++d) sizes.push_back(q.size(d)), strides.push_back(q.stride(d));
  return {sizes, strides};
}

}  // namespace

Tensor empty_like_dense(IntArrayRef sizes, const Tensor& like, ScalarType dtype) {
  const IntArrayRef strides = like.strides();
  return empty_strided(sizes, dense_strides_like(sizes, {strides}),
                       TensorOptions(dtype).device(like.device()));
}

bool rows_aligned(const Tensor& t) {
  const int64_t vec = 16 / static_cast<int64_t>(t.element_size());
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0 || t.stride(-1) != 1) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) % vec != 0) return false;
  return true;
}

bool qkv_packed(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.impl().storage().get() != k.impl().storage().get() ||
      q.impl().storage().get() != v.impl().storage().get() || !q.sizes().equals(k.sizes()) ||
      !q.sizes().equals(v.sizes()) || !q.strides().equals(k.strides()) || !q.strides().equals(v.strides()))
    return false;
  const int64_t step = k.storage_offset() - q.storage_offset();
  if (step <= 0 || v.storage_offset() - k.storage_offset() != step) return false;
  auto [sizes, strides] = block_of(q, k);
  return is_non_overlapping_and_dense(sizes, strides);
}

std::array<Tensor, 3> empty_qkv_grads(const Tensor& q, const Tensor& k, const Tensor& v, bool packed) {
  if (packed) {
    auto [sizes, strides] = block_of(q, k);
    Tensor block = empty_strided(sizes, strides, q.options());
    return {block.select(0, 0), block.select(0, 1), block.select(0, 2)};
  }
  return {empty_like_dense(q.sizes(), q, q.dtype()), empty_like_dense(k.sizes(), k, k.dtype()),
          empty_like_dense(v.sizes(), v, v.dtype())};
}

}  // namespace ember::cuda
