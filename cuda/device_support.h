#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ember/cuda/device.h"

// Which GPUs and drivers this build of ember runs on, and the errors for the others.
namespace ember::cuda {

// torch.cuda.get_arch_list: "sm_90" for each architecture ember's kernels were compiled to
// machine code for, "compute_90" for each one they carry PTX for (which the driver compiles for
// that and newer GPUs). Empty in a build without CUDA.
std::vector<std::string> get_arch_list();

namespace detail {

// CMake's CUDA_ARCHITECTURES, separated by ';' or ',' ("90", "80-real", "90a-virtual", "native"),
// in get_arch_list's names; entries that are not numbers ("native", "all") are kept as they are.
std::vector<std::string> arch_list_from_cmake(std::string_view architectures);

// The error for a GPU that none of ember's kernels can run on (`cuda_error`: what CUDA said).
std::string unsupported_gpu_message(const char* op, int device, const std::string& name, int major, int minor,
                                    const std::vector<std::string>& archs, const std::string& cuda_error);

// Why there is no device when the CUDA runtime found no usable driver: none installed (driver
// version 0), or one too old for the runtime ember links.
std::string missing_driver_message(Version driver, Version runtime);

// Throws unsupported_gpu_message's error, at the first use of `device`, if no kernel of this
// build runs on it. CUDA builds only.
void check_kernel_image(const char* op, int device);

}  // namespace detail
}  // namespace ember::cuda
