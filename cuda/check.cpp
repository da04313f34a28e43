#include "ember/cuda/check.h"

namespace ember::cuda::detail {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so the process can go on
  throw Error(ember::detail::str_cat("CUDA error: ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                     ") in ", expr, " at ", file, ":", line));
}

}  // namespace ember::cuda::detail
