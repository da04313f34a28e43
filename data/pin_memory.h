#pragma once

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember::data {

// The seam through which the DataLoader's pin_memory option copies a batch into page-locked host
// memory (faster, asynchronous host-to-GPU copies). The CUDA layer fills the kCUDA slot with its
// pinned host allocator; while the slot is empty, DataLoaderOptions().pin_memory(true) is refused.
using PinMemoryFn = Tensor (*)(const Tensor& cpu_tensor);
extern DispatchStub<PinMemoryFn> pin_memory_stub;

}  // namespace ember::data
