// Whether this build's kernels run on a device: asked once per device, at its first allocation.
#include <cuda_runtime.h>

#include <atomic>
#include <memory>

#include "ember/core/error.h"
#include "ember/cuda/check.h"
#include "ember/cuda/device_support.h"

namespace ember::cuda::detail {
namespace {

// Compiled like every kernel of ember, so CUDA finds an image for it exactly where it finds one
// for them (a cubin for the GPU, or PTX it can compile).
__global__ void probe_kernel() {}

}  // namespace

void check_kernel_image(const char* op, int device) {
  static const std::unique_ptr<std::atomic<bool>[]> checked(new std::atomic<bool>[device_count()]());
  if (checked[device].load(std::memory_order_acquire)) return;
  DeviceGuard guard(device);
  cudaFuncAttributes attributes;
  cudaError_t err = cudaFuncGetAttributes(&attributes, probe_kernel);
  const bool no_image = err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
                        err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidPtx ||
                        err == cudaErrorJitCompilerNotFound;
  if (no_image) {
    cudaGetLastError();  // not sticky; leave no error for the next call to find
    const DeviceProperties& p = get_device_properties(device);
    throw Error(unsupported_gpu_message(op, device, p.name, p.major, p.minor, get_arch_list(),
                                        cudaGetErrorString(err)));
  }
  EMBER_CUDA_CHECK(err);
  checked[device].store(true, std::memory_order_release);
}

}  // namespace ember::cuda::detail
