// profiler::Profile on the GPU: by default it times the device too; every kernel's device time is
// positive, an op's is its kernels', and the self device times add up to about the elapsed time of the profiled region
// measured by an outer event pair (the GPU runs behind the host, so the ranges tile the stream).
#include <ember/core/profiler.h>
#include <ember/cuda/event.h>
#include <ember/cuda/nvtx.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

using profiler::FunctionEventAvg;
using profiler::Profile;

class ProfilerCuda : public CudaTest {};

// A GPU-bound region: large matmuls queue faster than they run.
void workload(const Tensor& a) {
  Tensor x = a;
  for (int i = 0; i < 10; ++i) x = relu(matmul(x, a) * 1e-3);
  softmax(x, 1);
}

TEST_F(ProfilerCuda, DeviceTimesArePositiveAndSumToTheRegion) {
  manual_seed(0);
  Tensor a = randn({2048, 2048}, TensorOptions(kFloat32).device(Device(kCUDA)));
  workload(a);  // loads the kernels and cuBLAS before timing
  cuda::synchronize();
  double region_ms = 0;
  for (int session = 0; session < 2; ++session) {  // the second reuses the first's events
    Profile prof;
    ASSERT_TRUE(prof.profiles_device());
    cuda::Event start(true), end(true);
    start.record();
    workload(a);
    end.record();
    prof.stop();
    region_ms = start.elapsed_time(end);
    profiler::KeyAverages avg = prof.key_averages();
    ASSERT_TRUE(avg.has_device_time());
    ASSERT_NE(avg.find("bmm"), nullptr);
    EXPECT_EQ(avg.find("bmm")->count, 10);
    double self_device = 0;
    for (const FunctionEventAvg& e : avg.events()) {
      // Ops (ember::matmul, ember::t) hold their kernels' device time, none of their own.
      const bool op = e.key.starts_with("ember::") || e.key.starts_with("autograd::");
      if (op)
        EXPECT_EQ(e.self_device_time_total, 0.0) << e.key;
      else
        EXPECT_GT(e.device_time_total, 0.0) << e.key;
      EXPECT_GE(e.device_time_total + 1e-9, e.self_device_time_total) << e.key;
      self_device += e.self_device_time_total;
    }
    EXPECT_NEAR(avg.find("ember::matmul")->device_time_total, avg.find("bmm")->device_time_total, 1e-9);
    EXPECT_LE(self_device, region_ms * 1.01 + 0.05) << avg.table();
    EXPECT_GE(self_device, region_ms * 0.8) << avg.table();
    std::string table = avg.table("device_time_total", 25);
    EXPECT_NE(table.find("Self device time total"), std::string::npos) << table;
  }
}

// Both use the kernel-range hooks: whichever comes second is refused, and the first keeps them.
TEST(ProfilerNvtx, ProfilingAndEmitNvtxAreExclusive) {
  {
    Profile prof({profiler::ProfilerActivity::CPU});
    EXPECT_EMBER_ERROR(cuda::nvtx::EmitNvtx emit, "cuda::nvtx::set_emit_nvtx", "in use", "profiler::Profile");
    EXPECT_FALSE(cuda::nvtx::emit_nvtx_enabled());
    EXPECT_TRUE(prof.running());
  }
  cuda::nvtx::EmitNvtx emit;
  EXPECT_EMBER_ERROR(Profile prof({profiler::ProfilerActivity::CPU}), "profiler::Profile", "in use",
                     "emit_nvtx");
  EXPECT_TRUE(cuda::nvtx::emit_nvtx_enabled());
}

}  // namespace
}  // namespace ember::testing
