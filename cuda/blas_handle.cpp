#include "ember/cuda/blas_handle.h"

#include <map>
#include <mutex>
#include <utility>

#include "ember/core/allocator.h"
#include "ember/cuda/check.h"
#include "ember/cuda/handle_pool.h"

namespace ember::cuda {

namespace detail {

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  cudaGetLastError();  // a failed launch inside cuBLAS may have left a CUDA error behind
  throw Error(ember::detail::str_cat("cuBLAS error: ", cublasLtGetStatusName(status), " (",
                                     cublasLtGetStatusString(status), ") in ", expr, " at ", file, ":",
                                     line));
}

}  // namespace detail

namespace {

cublasLtHandle_t create_cublaslt() {
  cublasLtHandle_t h = nullptr;
  EMBER_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

}  // namespace

cublasLtHandle_t cublaslt_handle() {
  return detail::thread_handle<cublasLtHandle_t, &create_cublaslt>(detail::current_device());
}

Workspace cublaslt_workspace(const Stream& stream) {
  // Leaked with their memory: freeing into the caching allocator during static destruction
  // could outlive it.
  static auto* mutex = new std::mutex;
  static auto* spaces = new std::map<std::pair<int, cudaStream_t>, DataPtr>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto key = std::make_pair(stream.device_index(), stream.stream());
  auto it = spaces->find(key);
  if (it == spaces->end()) {
    Allocator* alloc = get_allocator(kCUDA);
    EMBER_CHECK(alloc, "cuBLASLt: no CUDA allocator is installed");
    it = spaces->emplace(key, alloc->allocate(kCublasLtWorkspaceBytes)).first;
  }
  return {it->second.ptr, kCublasLtWorkspaceBytes};
}

}  // namespace ember::cuda
