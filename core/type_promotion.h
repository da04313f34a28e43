#pragma once

#include "ember/core/tensor.h"

namespace ember {

// PyTorch's result_type: tensors with dims outrank 0-dim tensors, which outrank scalars; a
// lower rank only matters when its category (bool < integer < float) is higher.
ScalarType result_type(const Tensor& a, const Tensor& b);
ScalarType result_type(const Tensor& a, const Scalar& b);
ScalarType result_type(std::initializer_list<Tensor> tensors);

// float32 for integer and bool dtypes, else `t` (the dtype of exp, sqrt, true division...).
inline ScalarType to_float_dtype(ScalarType t) { return is_floating_point(t) ? t : kFloat32; }

// Throws naming `op` unless a result of dtype `from` can be written into a tensor of dtype
// `to` (no float into an integer, no number into bool), as in-place ops require.
void check_can_cast(const char* op, ScalarType from, ScalarType to);

}  // namespace ember
