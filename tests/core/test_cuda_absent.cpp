// Without a GPU (this build may have CUDA or not) the CUDA API answers "no device" or throws
// ember::Error; nothing crashes. Skipped where a GPU is present (the CUDA suite covers that).
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/device.h>
#include <ember/cuda/graph.h>
#include <ember/cuda/host_allocator.h>

#include "test_util.h"

namespace ember::testing {
namespace {

#ifdef EMBER_WITH_CUDA
constexpr const char* kWhy = "no CUDA device";
#else
constexpr const char* kWhy = "built without CUDA";
#endif

class CudaAbsentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  }
};

TEST_F(CudaAbsentTest, QueriesAnswerNoDevice) {
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  cuda::DeviceGuard nothing(-1);  // asks for no device: fine
  EXPECT_EQ(nothing.original_device(), -1);
  // Versions answer without a device (zero when not built or not loadable).
  cuda::driver_version();
  cuda::cublas_version();
#ifdef EMBER_WITH_CUDA
  EXPECT_TRUE(cuda::runtime_version().available());
#else
  EXPECT_FALSE(cuda::runtime_version().available());
  EXPECT_FALSE(cuda::cudnn_version().available());
  EXPECT_FALSE(cuda::nccl_version().available());
#endif
  EXPECT_FALSE(cuda::is_pinned(nullptr));
  cuda::empty_cache();  // nothing cached: a no-op
  cuda::host_empty_cache();
}

TEST_F(CudaAbsentTest, DeviceCallsThrow) {
  EXPECT_EMBER_ERROR(cuda::current_device(), "current_device", kWhy);
  EXPECT_EMBER_ERROR(cuda::set_device(0), "set_device", kWhy);
  EXPECT_EMBER_ERROR(cuda::DeviceGuard guard(0), "DeviceGuard", kWhy);
  EXPECT_EMBER_ERROR(cuda::get_device_name(0), "get_device_name", kWhy);
  EXPECT_EMBER_ERROR(cuda::get_device_properties(), "get_device_properties", kWhy);
  EXPECT_EMBER_ERROR(cuda::get_device_capability(), "get_device_capability", kWhy);
  EXPECT_EMBER_ERROR(cuda::mem_get_info(), "mem_get_info", kWhy);
  EXPECT_EMBER_ERROR(cuda::synchronize(), "synchronize", kWhy);
  EXPECT_EMBER_ERROR(cuda::memory_allocated(), "memory_allocated", kWhy);
  EXPECT_EMBER_ERROR(cuda::max_memory_reserved(0), "max_memory_reserved", kWhy);
  EXPECT_EMBER_ERROR(cuda::memory_stats(), "memory_stats", kWhy);
  EXPECT_EMBER_ERROR(cuda::memory_summary(), "memory_summary", kWhy);
  EXPECT_EMBER_ERROR(cuda::reset_peak_memory_stats(), "reset_peak_memory_stats", kWhy);
}

TEST_F(CudaAbsentTest, GraphCaptureThrows) {
  cuda::CUDAGraph g;
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  EXPECT_EMBER_ERROR(cuda::graph capture(g), kWhy);
  EXPECT_EMBER_ERROR(g.capture_begin(), kWhy);
  EXPECT_EMBER_ERROR(g.replay(), "CUDAGraph::replay");
  EXPECT_FALSE(g.captured());
  g.reset();
}

TEST_F(CudaAbsentTest, CudaTensorsThrow) {
  EXPECT_EMBER_ERROR(empty({2}, Device(kCUDA)), kWhy);
  EXPECT_EMBER_ERROR(empty({2}, Device(kCUDA, 1)), kWhy);
  EXPECT_EMBER_ERROR(zeros({0}, Device(kCUDA)), kWhy);
  Tensor x = ones({2, 3});
  EXPECT_EMBER_ERROR(x.cuda(), kWhy);
  EXPECT_EMBER_ERROR(x.to(Device("cuda:0")), kWhy);
  EXPECT_CLOSE(x, ones({2, 3}));  // the source is untouched
}

TEST_F(CudaAbsentTest, PinMemoryThrows) {
  Tensor x = ones({4});
  EXPECT_FALSE(x.is_pinned());
  EXPECT_FALSE(cuda::is_pinned(x.data_ptr()));
  EXPECT_EMBER_ERROR(x.pin_memory(), "pin_memory", kWhy);
}

}  // namespace
}  // namespace ember::testing
