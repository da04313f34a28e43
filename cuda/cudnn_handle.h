#pragma once

// cuDNN handles and EMBER_CUDNN_CHECK.
#include <cudnn.h>

#include "ember/core/error.h"

namespace ember::cuda {

namespace detail {
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line);
}  // namespace detail

// Every cuDNN call goes through EMBER_CUDNN_CHECK; errors name the call, the status (with
// cuDNN's own explanation when it has one), file and line.
#define EMBER_CUDNN_CHECK(expr)                                                                 \
  do {                                                                                          \
    cudnnStatus_t ember_cudnn_status_ = (expr);                                                 \
    if (ember_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                            \
      ::ember::cuda::detail::throw_cudnn_error(ember_cudnn_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// The calling thread's cuDNN handle for the current device, set to the current stream.
cudnnHandle_t cudnn_handle();

}  // namespace ember::cuda
