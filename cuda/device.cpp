#include "ember/cuda/device.h"

#include <cuda_runtime.h>

namespace ember::cuda {

int device_count() {
  int n = 0;
  // No driver or no device is an answer here (0), not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool is_available() { return device_count() > 0; }

}  // namespace ember::cuda
