#include "ember/cuda/stream.h"

#include "ember/cuda/check.h"

namespace ember::cuda {

Stream current_stream(int device) {
  if (device < 0) EMBER_CUDA_CHECK(cudaGetDevice(&device));
  return Stream(device, nullptr);
}

}  // namespace ember::cuda
