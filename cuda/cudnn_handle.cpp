#include "ember/cuda/cudnn_handle.h"

#include "ember/cuda/check.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/stream.h"

namespace ember::cuda {

namespace detail {

void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line) {
  cudaGetLastError();  // a failed launch inside cuDNN may have left a CUDA error behind
  char why[512] = {};
  cudnnGetLastErrorString(why, sizeof why);
  throw Error(ember::detail::str_cat("cuDNN error: ", cudnnGetErrorString(status), " in ", expr, " at ", file,
                                     ":", line, why[0] ? " (" : "", why, why[0] ? ")" : ""));
}

}  // namespace detail

namespace {

cudnnHandle_t create_cudnn() {
  cudnnHandle_t h = nullptr;
  EMBER_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

}  // namespace

cudnnHandle_t cudnn_handle() {
  const int device = detail::current_device();
  cudnnHandle_t h = detail::thread_handle<cudnnHandle_t, &create_cudnn>(device);
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream(device).stream()));
  return h;
}

}  // namespace ember::cuda
