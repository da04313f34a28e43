#pragma once

// Elementwise loss math shared by the CPU loop and a future CUDA kernel. T is the compute type.

#include <cmath>

#include "ember/core/macros.h"

namespace ember::ops {

// binary_cross_entropy_with_logits of one element with pos_weight pw, in the log-sum-exp form
// that never overflows: (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)).
template <class T>
struct BceWithLogits {
  EMBER_HOST_DEVICE T operator()(T x, T t, T pw) const {
    T log_weight = T(1) + (pw - T(1)) * t;
    T softplus_neg = std::log1p(std::exp(-std::fabs(x))) + (x < T(0) ? -x : T(0));
    return (T(1) - t) * x + log_weight * softplus_neg;
  }
};

}  // namespace ember::ops
