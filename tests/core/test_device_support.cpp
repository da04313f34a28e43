// Which GPUs and drivers a build runs on (cuda/device_support.h): the names of its architectures
// and the errors for a GPU or driver it cannot use, which need no GPU to check.
#include <ember/cuda/device_support.h>

#include "test_util.h"

namespace ember::testing {
namespace {

using Names = std::vector<std::string>;

TEST(DeviceSupport, ArchListFromCMakesArchitectures) {
  EXPECT_EQ(cuda::detail::arch_list_from_cmake("90"), (Names{"sm_90", "compute_90"}));
  EXPECT_EQ(cuda::detail::arch_list_from_cmake("80-real;90a-real,90-virtual"),
            (Names{"sm_80", "sm_90a", "compute_90"}));
  EXPECT_EQ(cuda::detail::arch_list_from_cmake("native"), (Names{"native"}));
  EXPECT_EQ(cuda::detail::arch_list_from_cmake(";;"), Names{});
  EXPECT_EQ(cuda::detail::arch_list_from_cmake(""), Names{});
}

TEST(DeviceSupport, ThisBuildsArchList) {
#ifdef EMBER_WITH_CUDA
  EXPECT_FALSE(cuda::get_arch_list().empty());
#else
  EXPECT_TRUE(cuda::get_arch_list().empty());
#endif
}

TEST(DeviceSupport, AnUnsupportedGpuIsNamedWithTheRebuildCommand) {
  std::string m = cuda::detail::unsupported_gpu_message("empty", 1, "NVIDIA A100-SXM4-80GB", 8, 0,
                                                        {"sm_90", "compute_90"}, "no kernel image");
  for (const char* part :
       {"empty: CUDA device 1 (NVIDIA A100-SXM4-80GB, compute capability 8.0)", "(no kernel image)",
        "for sm_90 compute_90", "cmake -DCMAKE_CUDA_ARCHITECTURES=80", "\"80;90\""})
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  EXPECT_NE(cuda::detail::unsupported_gpu_message("x", 0, "g", 12, 0, {}, "e").find("no architecture"),
            std::string::npos);
}

TEST(DeviceSupport, AMissingOrOldDriverIsSaidSo) {
  EXPECT_EQ(cuda::detail::missing_driver_message({}, {13, 0, 0}),
            "no NVIDIA driver is installed, which ember's CUDA 13.0 runtime needs");
  std::string old = cuda::detail::missing_driver_message({12, 4, 0}, {13, 0, 0});
  EXPECT_NE(old.find("the NVIDIA driver supports CUDA 12.4, older than the CUDA 13.0 runtime"),
            std::string::npos)
      << old;
  EXPECT_NE(old.find("update the driver"), std::string::npos);
}

}  // namespace
}  // namespace ember::testing
