// Device queries and selection (cuda/device.h) on a real GPU.
#include <ember/cuda/check.h>
#include <ember/cuda/device_support.h>

#include <string>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class CudaDeviceTest : public CudaTest {};

int device_of(const void* ptr) {
  cudaPointerAttributes attr{};
  EMBER_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  return attr.device;
}

TEST_F(CudaDeviceTest, CountAndCurrentDevice) {
  EXPECT_TRUE(cuda::is_available());
  int n = cuda::device_count();
  EXPECT_GE(n, 1);
  int raw = -1;
  ASSERT_EQ(cudaGetDeviceCount(&raw), cudaSuccess);
  EXPECT_EQ(n, raw);
  int current = cuda::current_device();
  EXPECT_GE(current, 0);
  EXPECT_LT(current, n);
}

TEST_F(CudaDeviceTest, PropertiesMatchTheRuntime) {
  cudaDeviceProp raw{};
  ASSERT_EQ(cudaGetDeviceProperties(&raw, 0), cudaSuccess);
  const cuda::DeviceProperties& p = cuda::get_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.name, raw.name);
  EXPECT_EQ(cuda::get_device_name(0), p.name);
  EXPECT_EQ(p.total_memory, raw.totalGlobalMem);
  EXPECT_GE(p.total_memory, size_t{4} << 30);
  EXPECT_EQ(p.multi_processor_count, raw.multiProcessorCount);
  EXPECT_GT(p.multi_processor_count, 0);
  EXPECT_GT(p.l2_cache_size, 0u);
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_GT(p.max_threads_per_multi_processor, 0);
  EXPECT_EQ(p.uuid.size(), 36u);  // 32 hex digits and 4 dashes
  auto [major, minor] = cuda::get_device_capability(0);
  EXPECT_GE(major, 7);
  EXPECT_EQ(major, raw.major);
  EXPECT_EQ(minor, raw.minor);
  // Cached: the same object on every call; the current device is the default.
  EXPECT_EQ(&cuda::get_device_properties(0), &p);
  EXPECT_EQ(cuda::get_device_name(), cuda::get_device_name(cuda::current_device()));
}

TEST_F(CudaDeviceTest, MemGetInfoSeesAnAllocation) {
  auto [free, total] = cuda::mem_get_info();
  EXPECT_GT(total, 0u);
  EXPECT_LE(free, total);
  EXPECT_LE(total, cuda::get_device_properties().total_memory);
  // cudaMalloc directly (the caching allocator would keep the memory afterwards).
  constexpr size_t kBytes = size_t{256} << 20;
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kBytes), cudaSuccess);
  size_t free_during = cuda::mem_get_info().first;
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_LE(free_during + kBytes, free);
}

TEST_F(CudaDeviceTest, BadDeviceIndexThrows) {
  int n = cuda::device_count();
  int before = cuda::current_device();
  std::string index = "invalid CUDA device index " + std::to_string(n);
  std::string count = "ember sees " + std::to_string(n) + " device";
  EXPECT_EMBER_ERROR(cuda::get_device_name(n), "get_device_name", index.c_str(), count.c_str());
  EXPECT_EMBER_ERROR(cuda::get_device_properties(n), "get_device_properties", index.c_str());
  EXPECT_EMBER_ERROR(cuda::get_device_capability(n), "get_device_capability", index.c_str());
  EXPECT_EMBER_ERROR(cuda::mem_get_info(n), "mem_get_info", index.c_str());
  EXPECT_EMBER_ERROR(cuda::synchronize(n), "synchronize", index.c_str());
  EXPECT_EMBER_ERROR(cuda::set_device(n), "set_device", index.c_str(), count.c_str());
  EXPECT_EMBER_ERROR(cuda::set_device(-1), "set_device", "invalid CUDA device index -1");
  EXPECT_EMBER_ERROR(cuda::DeviceGuard guard(n), "DeviceGuard", index.c_str());
  EXPECT_EMBER_ERROR(empty({2}, Device(kCUDA, n)), "CUDA caching allocator", index.c_str(), count.c_str());
  EXPECT_EQ(cuda::current_device(), before);  // nothing changed on the way
}

TEST_F(CudaDeviceTest, DeviceGuardRestores) {
  int n = cuda::device_count();
  cuda::set_device(0);
  {
    cuda::DeviceGuard none(-1);
    EXPECT_EQ(cuda::current_device(), 0);
    EXPECT_EQ(none.original_device(), -1);
  }
  {
    cuda::DeviceGuard same(0);
    EXPECT_EQ(cuda::current_device(), 0);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  if (n < 2) GTEST_SKIP() << "one GPU: switching between devices is not tested";
  {
    cuda::DeviceGuard outer(1);
    EXPECT_EQ(cuda::current_device(), 1);
    EXPECT_EQ(outer.original_device(), 0);
    {
      cuda::DeviceGuard inner(0);
      EXPECT_EQ(cuda::current_device(), 0);
    }
    EXPECT_EQ(cuda::current_device(), 1);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  // An exception leaving the scope restores too.
  try {
    cuda::DeviceGuard guard(1);
    throw Error("leave");
  } catch (const Error&) {
  }
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::set_device(1);
  EXPECT_EQ(cuda::current_device(), 1);
  cuda::set_device(0);
}

TEST_F(CudaDeviceTest, TensorsNameTheirConcreteDevice) {
  int current = cuda::current_device();
  Tensor t = empty({4}, Device(kCUDA));
  EXPECT_EQ(t.device(), Device(kCUDA, current));
  EXPECT_EQ(device_of(t.data_ptr()), current);
  EXPECT_EQ(empty({0}, Device(kCUDA)).device(), Device(kCUDA, current));
  EXPECT_EQ(empty({4}, Device(kCUDA, 0)).device(), Device(kCUDA, 0));
  EXPECT_EQ(empty({4}, Device("cuda")).device().index, current);
  if (cuda::device_count() < 2) return;
  cuda::set_device(0);
  Tensor u = empty({4}, Device(kCUDA, 1));
  EXPECT_EQ(u.device(), Device(kCUDA, 1));
  EXPECT_EQ(device_of(u.data_ptr()), 1);
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST_F(CudaDeviceTest, SynchronizeWaitsForQueuedWork) {
  Tensor t = empty({int64_t{64} << 20}, TensorOptions(kUInt8).device(kCUDA));
  for (int i = 0; i < 8; ++i) EMBER_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), i, t.nbytes(), nullptr));
  cuda::synchronize();
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
  unsigned char last = 0;
  EMBER_CUDA_CHECK(
      cudaMemcpy(&last, static_cast<char*>(t.data_ptr()) + t.nbytes() - 1, 1, cudaMemcpyDeviceToHost));
  EXPECT_EQ(last, 7);
  cuda::synchronize(0);
}

TEST_F(CudaDeviceTest, LibraryVersions) {
  cuda::Version rt = cuda::runtime_version();
  EXPECT_EQ(rt.major, CUDART_VERSION / 1000);
  EXPECT_EQ(rt.minor, CUDART_VERSION % 1000 / 10);
  // The driver supports at least the runtime's CUDA version (else nothing would run).
  cuda::Version drv = cuda::driver_version();
  EXPECT_GE(drv.major * 100 + drv.minor, rt.major * 100 + rt.minor);
  EXPECT_GE(cuda::cudnn_version().major, 8);
  EXPECT_GE(cuda::cublas_version().major, 11);
  cuda::Version nccl = cuda::nccl_version();
  if (nccl.available()) {
    EXPECT_EQ(nccl.major, 2);
  }
  EXPECT_EQ(rt.str(), std::to_string(rt.major) + "." + std::to_string(rt.minor) + ".0");
  EXPECT_EQ(cuda::Version{}.str(), "not available");
}

// The GPU runs this build's kernels: the architecture list covers its capability (as machine
// code of the same major version, or PTX of an older one), and the first-use check passes.
TEST_F(CudaDeviceTest, ArchListCoversThisGpu) {
  auto [major, minor] = cuda::get_device_capability();
  bool covered = false;
  for (const std::string& a : cuda::get_arch_list()) {
    bool sm = a.starts_with("sm_");
    if (!sm && !a.starts_with("compute_")) continue;
    int v = std::stoi(a.substr(sm ? 3 : 8));
    covered |= sm ? v / 10 == major && v % 10 <= minor : v <= major * 10 + minor;
  }
  EXPECT_TRUE(covered) << "capability " << major << "." << minor;
  cuda::detail::check_kernel_image("test", cuda::current_device());
}

}  // namespace
}  // namespace ember::testing
