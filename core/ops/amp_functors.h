#pragma once

// The per-element math of the GradScaler's ops (core/ops/amp_ops.h), written once for the CPU
// kernel and the CUDA one.

#include <cmath>
#include <cstdint>

#include "ember/core/macros.h"

namespace ember::ops {

// PyTorch's _amp_update_scale_: back off on an inf/NaN step, grow after growth_interval clean
// steps (keeping the old scale when the grown one would overflow). The products round as
// PyTorch's (float times double, stored as float).
EMBER_HOST_DEVICE inline void update_scale(float* scale, int32_t* growth_tracker, const float* found_inf,
                                           double growth_factor, double backoff_factor,
                                           int64_t growth_interval) {
  if (*found_inf != 0) {
    *scale = static_cast<float>(*scale * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*growth_tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(*scale * growth_factor);
    if (std::isfinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = static_cast<int32_t>(successful);
  }
}

}  // namespace ember::ops
