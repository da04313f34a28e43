#pragma once

// Whole-tensor comparisons, as torch.equal, torch.isclose and torch.allclose, and the elementwise
// tests torch.isnan, torch.isinf and torch.isfinite.
#include "ember/core/tensor.h"

namespace ember {

// True when a and b have the same sizes and equal elements (after type promotion); NaN is never
// equal. Both on one device; an answer on the host, so on CUDA it waits for the GPU.
bool equal(const Tensor& a, const Tensor& b);

// |a - b| <= atol + rtol * |b| elementwise, after broadcasting (bool). Infinities are close only
// to themselves; NaNs only with equal_nan. Floating point or integer operands; rtol and atol
// must be non-negative.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
// isclose(...).all(), on the host.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// Bool tensors of x's shape: NaN; +-inf; neither. Integer and bool tensors hold neither.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

}  // namespace ember
