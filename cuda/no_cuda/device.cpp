// Built instead of cuda/ when ember is configured without CUDA.
#include "ember/cuda/device.h"

namespace ember::cuda {

int device_count() { return 0; }
bool is_available() { return false; }

}  // namespace ember::cuda
