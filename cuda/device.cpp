#include "ember/cuda/device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/cuda/check.h"
#include "ember/cuda/device_error.h"
#include "ember/cuda/device_support.h"

#ifdef EMBER_WITH_NCCL
#include <nccl.h>
#endif

namespace ember::cuda {
namespace {

// What cudaGetDeviceCount said: the count is fixed for the life of the process (CUDA reads
// CUDA_VISIBLE_DEVICES once). No driver or no device is an answer (0 devices), not an error.
struct DeviceCount {
  int n = 0;
  cudaError_t error = cudaSuccess;
};

const DeviceCount& count_devices() {
  static const DeviceCount count = [] {
    DeviceCount c;
    c.error = cudaGetDeviceCount(&c.n);
    if (c.error != cudaSuccess) {
      cudaGetLastError();
      c.n = 0;
    }
    return c;
  }();
  return count;
}

// Why ember sees no device.
std::string no_device_reason() {
  cudaError_t e = count_devices().error;
  if (e == cudaSuccess || e == cudaErrorNoDevice) return "ember sees no GPU";
  if (e == cudaErrorInsufficientDriver)
    return detail::missing_driver_message(driver_version(), runtime_version());
  return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
}

std::string format_uuid(const cudaUUID_t& u) {
  std::string s;
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(u.bytes[i]));
    s += hex;
  }
  return s;
}

DeviceProperties read_properties(int device) {
  cudaDeviceProp p{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties d;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.multi_processor_count = p.multiProcessorCount;
  d.max_threads_per_multi_processor = p.maxThreadsPerMultiProcessor;
  d.warp_size = p.warpSize;
  d.l2_cache_size = static_cast<size_t>(p.l2CacheSize);
  d.shared_memory_per_block = p.sharedMemPerBlock;
  d.shared_memory_per_block_optin = p.sharedMemPerBlockOptin;
  d.shared_memory_per_multiprocessor = p.sharedMemPerMultiprocessor;
  d.regs_per_multiprocessor = p.regsPerMultiprocessor;
  d.is_integrated = p.integrated != 0;
  d.is_multi_gpu_board = p.isMultiGpuBoard != 0;
  d.pci_bus_id = p.pciBusID;
  d.uuid = format_uuid(p.uuid);
  return d;
}

// "12040" -> 12.4 (cudaRuntimeGetVersion and cudaDriverGetVersion encode major * 1000 + minor * 10).
Version cuda_version(int v) { return {v / 1000, v % 1000 / 10, 0}; }

// major * major_unit + minor * 100 + patch, as cuDNN and NCCL encode theirs.
Version library_version(int v, int major_unit) { return {v / major_unit, v % major_unit / 100, v % 100}; }

}  // namespace

int device_count() { return count_devices().n; }

bool is_available() { return device_count() > 0; }

namespace detail {

int resolve_device(const char* op, int device) {
  int n = device_count();
  EMBER_CHECK(n > 0, op, ": no CUDA device (", no_device_reason(), ")");
  if (device < 0) {
    EMBER_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
  EMBER_CHECK(device < n, op, ": invalid CUDA device index ", device, ", ember sees ", n, " device",
              n == 1 ? "" : "s", " (valid: 0..", n - 1, ")");
  return device;
}

}  // namespace detail

int current_device() { return detail::resolve_device("current_device", -1); }

void set_device(int device) {
  EMBER_CHECK(device >= 0, "set_device: invalid CUDA device index ", device);
  EMBER_CUDA_CHECK(cudaSetDevice(detail::resolve_device("set_device", device)));
}

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  device = detail::resolve_device("DeviceGuard", device);
  int current = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device) return;
  EMBER_CUDA_CHECK(cudaSetDevice(device));
  original_ = current;
}

DeviceGuard::~DeviceGuard() {
  // Going back to a device that was current does not fail; a destructor must not throw anyway.
  if (original_ >= 0) cudaSetDevice(original_);
}

const DeviceProperties& get_device_properties(int device) {
  device = detail::resolve_device("get_device_properties", device);
  struct Cache {
    std::vector<std::once_flag> once;
    std::vector<DeviceProperties> props;
  };
  static Cache cache{std::vector<std::once_flag>(device_count()),
                     std::vector<DeviceProperties>(device_count())};
  std::call_once(cache.once[device], [&] { cache.props[device] = read_properties(device); });
  return cache.props[device];
}

std::string get_device_name(int device) {
  return get_device_properties(detail::resolve_device("get_device_name", device)).name;
}

std::pair<int, int> get_device_capability(int device) {
  const DeviceProperties& p = get_device_properties(detail::resolve_device("get_device_capability", device));
  return {p.major, p.minor};
}

bool is_bf16_supported() { return is_available() && get_device_capability().first >= 8; }

std::pair<size_t, size_t> mem_get_info(int device) {
  DeviceGuard guard(detail::resolve_device("mem_get_info", device));
  size_t free = 0, total = 0;
  EMBER_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {free, total};
}

void synchronize(int device) {
  DeviceGuard guard(detail::resolve_device("synchronize", device));
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
  raise_device_errors();
}

Version runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return cuda_version(v);
}

Version driver_version() {
  int v = 0;  // stays 0 without a driver
  if (cudaDriverGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return cuda_version(v);
}

Version cudnn_version() {
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch, cuDNN 8 major * 1000 + ...
  int v = static_cast<int>(cudnnGetVersion());
  return library_version(v, v >= 90000 ? 10000 : 1000);
}

Version cublas_version() {
  Version v;
  if (cublasGetProperty(MAJOR_VERSION, &v.major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &v.minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &v.patch) != CUBLAS_STATUS_SUCCESS)
    return {};
  return v;
}

Version nccl_version() {
#ifdef EMBER_WITH_NCCL
  // NCCL 2.9 and later encode major * 10000 + minor * 100 + patch, earlier ones major * 1000 + ...
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return {};
  return library_version(v, v >= 10000 ? 10000 : 1000);
#else
  return {};
#endif
}

}  // namespace ember::cuda
