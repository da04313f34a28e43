#pragma once

// GPU copies of CPU tensors in the memory layouts the CUDA kernels must handle.

#include <optional>

#include "cuda_test_util.h"

namespace ember::testing {

enum class Layout { Contiguous, Transposed, Strided, ChannelsLast };

inline const char* to_string(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::Strided:
      return "strided";
    default:
      return "channels-last";
  }
}

// t's values on the GPU: contiguous; with its last two dims stored transposed (column-major
// matrices); as every other element of a wider buffer (last-dim stride 2); or, for 4D, NHWC.
inline Tensor on_gpu(const Tensor& t, Layout layout) {
  switch (layout) {
    case Layout::Contiguous:
      return t.cuda();
    case Layout::Transposed:
      return t.mT().contiguous().cuda().mT();
    case Layout::Strided: {
      DimVector big(t.sizes());
      big.back() *= 2;
      Tensor view = zeros(big, TensorOptions(t.dtype()).device(kCUDA)).slice(-1, 0, std::nullopt, 2);
      view.copy_(t.cuda());
      return view;
    }
    default:
      return t.permute({0, 2, 3, 1}).contiguous().cuda().permute({0, 3, 1, 2});
  }
}

// cuda_tolerance(t) scaled, for results summed over many products.
inline Tolerance scaled_tolerance(ScalarType t, double scale) {
  Tolerance tol = cuda_tolerance(t);
  return {tol.rtol * scale, tol.atol * scale};
}

}  // namespace ember::testing
