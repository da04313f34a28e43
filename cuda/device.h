#pragma once

#include <string>

namespace ember::cuda {

// Device queries; on a machine or build without CUDA they answer false / 0, never crash.
bool is_available();
int device_count();

}  // namespace ember::cuda
