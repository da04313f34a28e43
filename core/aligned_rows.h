#pragma once

// Matrices whose rows start on 16-byte boundaries. A wide row of an odd width (a 30522-word
// vocabulary's logits in bf16) puts every row but the first off them, and then cuBLASLt's kernels
// and the row kernels' 16-byte vectors no longer apply: on the H200 the head's products ran 3x
// slower. Such a matrix the framework allocates pads its rows instead: cross_entropy's gradient, and
// the output of a fused linear (addmm_bias) on devices that have one.
#include <cstdint>

#include "ember/core/tensor.h"

namespace ember::detail {

// Whether rows of `cols` elements of `dtype` are padded: wide enough that the padding stays under
// 1% and not already a multiple of 16 bytes.
bool pads_rows(int64_t cols, ScalarType dtype);

// An uninitialized [rows, cols] tensor, a view whose rows lie 16 bytes apart in a wider buffer
// where pads_rows, else contiguous.
Tensor empty_aligned_rows(int64_t rows, int64_t cols, const TensorOptions& options);

}  // namespace ember::detail
