#pragma once

// cuBLASLt handles and workspaces, and EMBER_CUBLAS_CHECK.
#include <cublasLt.h>

#include <cstddef>

#include "ember/core/error.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {

namespace detail {
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);
}  // namespace detail

// Every cuBLAS/cuBLASLt call goes through EMBER_CUBLAS_CHECK; errors name the call, the status,
// file and line.
#define EMBER_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                            \
    cublasStatus_t ember_cublas_status_ = (expr);                                                 \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::ember::cuda::detail::throw_cublas_error(ember_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// The workspace cuBLASLt may use per call: 32 MiB, what PyTorch gives it on Hopper.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

// The calling thread's cuBLASLt handle for the current device.
cublasLtHandle_t cublaslt_handle();

struct Workspace {
  void* ptr;
  size_t bytes;
};

// The cuBLASLt workspace of `stream` (on its device): taken once from ember's CUDA allocator and
// kept, shared by every product on that stream, whose order keeps the uses apart.
Workspace cublaslt_workspace(const Stream& stream);

}  // namespace ember::cuda
