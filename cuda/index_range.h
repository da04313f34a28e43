#pragma once

#include <optional>

#include "ember/core/ops/indexing.h"

namespace ember::cuda {

// The smallest and largest value of a non-empty int32 or int64 CUDA tensor, leaving out the
// elements equal to `skip` ({INT64_MAX, INT64_MIN} when none is left): one reduction, then a copy
// to the host, so the caller can throw before any kernel reads through a bad index.
IndexRange index_range(const Tensor& index, std::optional<int64_t> skip = std::nullopt);

}  // namespace ember::cuda
