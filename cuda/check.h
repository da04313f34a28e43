#pragma once

#include <cuda_runtime.h>

#include "ember/core/error.h"

namespace ember::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

}  // namespace ember::cuda::detail

// Every CUDA runtime call goes through EMBER_CUDA_CHECK; every kernel launch is followed by
// EMBER_CUDA_LAUNCH_CHECK(). Errors name the call, file and line.
#define EMBER_CUDA_CHECK(expr)                                                           \
  do {                                                                                   \
    cudaError_t ember_cuda_err_ = (expr);                                                \
    if (ember_cuda_err_ != cudaSuccess)                                                  \
      ::ember::cuda::detail::throw_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define EMBER_CUDA_LAUNCH_CHECK() EMBER_CUDA_CHECK(cudaGetLastError())
