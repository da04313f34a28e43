#pragma once

#include <cstddef>
#include <string>
#include <utility>

// Device queries and selection (torch.cuda.*). This header has no CUDA types, so a build
// without CUDA has it too (cuda/no_cuda/): queries then answer false / 0, everything else throws
// "ember was built without CUDA". Where a device is asked for, -1 means the current one; an
// index out of range throws, naming it and the device count.
namespace ember::cuda {

bool is_available();
int device_count();
int current_device();
void set_device(int device);

// Makes `device` current for its scope and restores the previous one (-1: changes nothing).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  int original_device() const { return original_; }

 private:
  int original_ = -1;  // -1: nothing to restore
};

// torch.cuda.get_device_properties: read once per device and cached.
struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;
  size_t total_memory = 0;
  int multi_processor_count = 0;
  int max_threads_per_multi_processor = 0;
  int warp_size = 0;
  size_t l2_cache_size = 0;
  size_t shared_memory_per_block = 0;
  size_t shared_memory_per_block_optin = 0;  // what a kernel may ask for beyond the default
  size_t shared_memory_per_multiprocessor = 0;
  int regs_per_multiprocessor = 0;
  bool is_integrated = false;
  bool is_multi_gpu_board = false;
  int pci_bus_id = 0;
  std::string uuid;  // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi -L adds "GPU-")
};
const DeviceProperties& get_device_properties(int device = -1);
std::string get_device_name(int device = -1);
std::pair<int, int> get_device_capability(int device = -1);  // {major, minor}
// torch.cuda.is_bf16_supported(): a GPU with native bfloat16 arithmetic (compute capability 8.0 or
// later) is available.
bool is_bf16_supported();

// {free, total} bytes of the device as the driver sees it (cudaMemGetInfo).
std::pair<size_t, size_t> mem_get_info(int device = -1);

// Waits for all work on every stream of the device.
void synchronize(int device = -1);

// Library versions; a zero version (available() false) means not built or not loadable.
struct Version {
  int major = 0, minor = 0, patch = 0;
  bool available() const { return major > 0; }
  std::string str() const {  // "12.4.1"
    return available() ? std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch)
                       : "not available";
  }
};
Version runtime_version();  // the CUDA runtime ember links
Version driver_version();   // the newest CUDA version the installed driver supports
Version cudnn_version();
Version cublas_version();
Version nccl_version();  // zero when ember was built without NCCL

namespace detail {
// Checks `device` (-1: the current one) and returns the concrete index; errors start with `op`.
int resolve_device(const char* op, int device);
}  // namespace detail

}  // namespace ember::cuda
