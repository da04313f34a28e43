#include "ember/cuda/device_support.h"

#include <cctype>

#include "ember/core/error.h"

// CMake's CUDA_ARCHITECTURES of this build, with ',' for ';' (CMakeLists.txt); unset without CUDA.
#ifndef EMBER_CUDA_ARCHITECTURES
#define EMBER_CUDA_ARCHITECTURES ""
#endif

namespace ember::cuda {

std::vector<std::string> get_arch_list() { return detail::arch_list_from_cmake(EMBER_CUDA_ARCHITECTURES); }

namespace detail {

std::vector<std::string> arch_list_from_cmake(std::string_view architectures) {
  std::vector<std::string> out;
  while (!architectures.empty()) {
    size_t end = architectures.find_first_of(";,");
    std::string_view item = architectures.substr(0, end);
    architectures = end == std::string_view::npos ? std::string_view() : architectures.substr(end + 1);
    if (item.empty()) continue;
    if (!std::isdigit(static_cast<unsigned char>(item[0]))) {
      out.emplace_back(item);
      continue;
    }
    // "90" is both machine code and PTX (CMake's default for a bare number).
    bool real = true, virt = true;
    if (item.ends_with("-real")) {
      item.remove_suffix(5);
      virt = false;
    } else if (item.ends_with("-virtual")) {
      item.remove_suffix(8);
      real = false;
    }
    if (real) out.push_back("sm_" + std::string(item));
    if (virt) out.push_back("compute_" + std::string(item));
  }
  return out;
}

std::string unsupported_gpu_message(const char* op, int device, const std::string& name, int major, int minor,
                                    const std::vector<std::string>& archs, const std::string& cuda_error) {
  std::string built;
  for (const std::string& a : archs) built += (built.empty() ? "" : " ") + a;
  const std::string own = std::to_string(major) + std::to_string(minor);
  return ember::detail::str_cat(
      op, ": CUDA device ", device, " (", name, ", compute capability ", major, ".", minor,
      ") cannot run ember's kernels (", cuda_error, "): this build has them for ",
      built.empty() ? "no architecture" : built,
      " (sm_XY runs on capability X.Y to X.9, compute_XY is PTX the driver compiles for X.Y "
      "and newer). Rebuild ember for this GPU: cmake -DCMAKE_CUDA_ARCHITECTURES=",
      own, " (or a list such as \"", own, ";90\")");
}

std::string missing_driver_message(Version driver, Version runtime) {
  const std::string cuda = std::to_string(runtime.major) + "." + std::to_string(runtime.minor);
  if (!driver.available())
    return ember::detail::str_cat("no NVIDIA driver is installed, which ember's CUDA ", cuda,
                                  " runtime needs");
  return ember::detail::str_cat(
      "the NVIDIA driver supports CUDA ", driver.major, ".", driver.minor, ", older than the CUDA ", cuda,
      " runtime ember was built with: update the driver, or build ember with a CUDA "
      "toolkit no newer than the driver");
}

}  // namespace detail
}  // namespace ember::cuda
