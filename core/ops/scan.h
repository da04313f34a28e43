#pragma once

// Scans along a dim. Tensor::cumsum calls cumsum.

#include <optional>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// Running sums along dim. Integer and bool inputs give int64 unless `dtype` says otherwise; with
// `dtype` the input is cast to it first. Floating sums accumulate in double.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);

// The kernel family: out = cumsum(in) along dim, out and in of one shape and dtype.
using CumsumFn = void (*)(const Tensor& out, const Tensor& in, int64_t dim);
extern DispatchStub<CumsumFn> cumsum_stub;

}  // namespace ember
