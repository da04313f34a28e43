// Built instead of cuda/ when ember is configured without CUDA: queries answer "no device",
// everything that needs one throws.
#include "ember/cuda/device.h"

#include "ember/cuda/no_cuda/no_cuda.h"

namespace ember::cuda {

int device_count() { return 0; }
bool is_available() { return false; }
int current_device() { detail::throw_no_cuda("current_device"); }
void set_device(int) { detail::throw_no_cuda("set_device"); }

DeviceGuard::DeviceGuard(int device) {
  if (device >= 0) detail::throw_no_cuda("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

const DeviceProperties& get_device_properties(int) { detail::throw_no_cuda("get_device_properties"); }
std::string get_device_name(int) { detail::throw_no_cuda("get_device_name"); }
std::pair<int, int> get_device_capability(int) { detail::throw_no_cuda("get_device_capability"); }
bool is_bf16_supported() { return false; }
std::pair<size_t, size_t> mem_get_info(int) { detail::throw_no_cuda("mem_get_info"); }
void synchronize(int) { detail::throw_no_cuda("synchronize"); }

Version runtime_version() { return {}; }
Version driver_version() { return {}; }
Version cudnn_version() { return {}; }
Version cublas_version() { return {}; }
Version nccl_version() { return {}; }

namespace detail {
int resolve_device(const char* op, int) { throw_no_cuda(op); }
}  // namespace detail

}  // namespace ember::cuda
