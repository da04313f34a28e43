#pragma once

#include <ember/cuda/device.h>

#include "test_util.h"

namespace ember::testing {

// Fixture for every CUDA test: skipped, with the reason, on a machine without a GPU.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// CUDA against CPU: both compute in the dtype (f16/bf16 in float), but reductions, cuBLAS and
// fast math may order and round differently, so the bounds are a few ulps of the dtype looser
// than torch.testing's defaults.
inline Tolerance cuda_tolerance(ScalarType t) {
  switch (t) {
    case kFloat64: return {1e-10, 1e-10};
    case kFloat32: return {1e-4, 1e-5};
    case kFloat16: return {2e-3, 2e-3};
    case kBFloat16: return {1.6e-2, 1e-2};
    default: return {0, 0};
  }
}

// max |got - want| within `frac` of max |want| (want on the CPU, float64), or 1e-6 where want is
// about zero: the error of f16/bf16 products grows with the values, not elementwise.
inline ::testing::AssertionResult close_to(const Tensor& got, const Tensor& want, double frac) {
  const double err = (got.cpu().to(kFloat64) - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>();
  if (err <= frac * scale + 1e-6) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max error " << err << " over " << frac << " x max " << scale;
}

}  // namespace ember::testing
