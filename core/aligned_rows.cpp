#include "ember/core/aligned_rows.h"

#include "ember/core/factories.h"

namespace ember::detail {

namespace {
constexpr int64_t kRowAlignment = 16;     // bytes: one vector load, cuBLASLt's widest alignment
constexpr int64_t kMinPaddedCols = 1024;  // the at most 15 bytes of padding stay under 1% of a row
}  // namespace

bool pads_rows(int64_t cols, ScalarType dtype) {
  return cols >= kMinPaddedCols && (cols * static_cast<int64_t>(element_size(dtype))) % kRowAlignment != 0;
}

Tensor empty_aligned_rows(int64_t rows, int64_t cols, const TensorOptions& options) {
  if (rows <= 1 || !pads_rows(cols, options.dtype())) return empty({rows, cols}, options);
  const int64_t per_vector = kRowAlignment / static_cast<int64_t>(element_size(options.dtype()));
  const int64_t padded = (cols + per_vector - 1) / per_vector * per_vector;
  return empty({rows, padded}, options).narrow(1, 0, cols);
}

}  // namespace ember::detail
