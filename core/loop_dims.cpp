#include "ember/core/loop_dims.h"

#include <algorithm>

namespace ember {

void coalesce_dims(LoopDims& dims, int n) {
  std::stable_sort(dims.begin(), dims.end(),
                   [](const LoopDim& a, const LoopDim& b) { return a.strides[0] > b.strides[0]; });
  LoopDims merged;
  for (const LoopDim& d : dims) {
    bool merge = !merged.empty();
    for (int j = 0; j < n && merge; ++j) merge = merged.back().strides[j] == d.strides[j] * d.size;
    if (merge) {
      merged.back().size *= d.size;
      merged.back().strides = d.strides;
    } else {
      merged.push_back(d);
    }
  }
  dims = merged;
}

}  // namespace ember
