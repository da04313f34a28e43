#pragma once

#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember::cuda {

// A draw's seed and offset as an int64 tensor [seed, offset << offset_shift] on `device`, written by
// one kernel on the current stream, for kernels that read them from memory (cuDNN's attention). A
// state captured into a CUDA graph is resolved by that kernel at each replay.
Tensor philox_tensor(PhiloxState rng, Device device, int offset_shift = 0);
// The same into `out`, a contiguous int64 CUDA tensor of 2 elements.
void write_philox(const Tensor& out, PhiloxState rng, int offset_shift = 0);

}  // namespace ember::cuda
