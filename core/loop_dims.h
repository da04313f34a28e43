#pragma once

// The dims an elementwise loop walks (the CPU ElementwiseIter and the CUDA ElementwisePlan):
// each dim's size and every operand's byte stride along it.

#include <array>

#include "ember/core/small_vector.h"

namespace ember {

inline constexpr int kMaxLoopOperands = 4;  // the output and up to three inputs (where)

struct LoopDim {
  int64_t size;
  std::array<int64_t, kMaxLoopOperands> strides;
};
using LoopDims = SmallVector<LoopDim, 6>;  // no heap allocation below 7 dims

// Orders dims outermost first by operand 0's strides (stably, so ties keep their order; an
// output in NHWC memory is walked as NHWC), then merges neighbours that all `n` operands walk
// as one dim: an NHWC output with NHWC inputs becomes a single dim.
void coalesce_dims(LoopDims& dims, int n);

}  // namespace ember
