// Environment report, like `python -m torch.utils.collect_env`: what ember was built with and
// what it sees. Run: build/tools/env_report
#include <ember/ember.h>

#include <cstdio>
#include <string>

namespace {

double gib(size_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

void report_devices() {
  for (int d = 0; d < ember::cuda::device_count(); ++d) {
    const ember::cuda::DeviceProperties& p = ember::cuda::get_device_properties(d);
    auto [free, total] = ember::cuda::mem_get_info(d);
    std::printf("cuda:%d                 %s\n", d, p.name.c_str());
    std::printf("  capability:          %d.%d\n", p.major, p.minor);
    std::printf("  memory:              %.2f GiB total, %.2f GiB free\n", gib(total), gib(free));
    std::printf("  SMs:                 %d (%d threads each)\n", p.multi_processor_count,
                p.max_threads_per_multi_processor);
    std::printf("  L2 cache:            %.1f MiB\n", static_cast<double>(p.l2_cache_size) / (1 << 20));
    std::printf("  uuid:                %s\n", p.uuid.c_str());
  }
}

}  // namespace

int main() {
#ifdef EMBER_WITH_CUDA
  const char* cuda_built = "yes";
#else
  const char* cuda_built = "no";
#endif
  std::printf("ember built with CUDA: %s\n", cuda_built);
  std::string archs;
  for (const std::string& a : ember::cuda::get_arch_list()) archs += (archs.empty() ? "" : " ") + a;
  std::printf("CUDA architectures:    %s\n", archs.empty() ? "none" : archs.c_str());
  std::printf("CUDA runtime:          %s\n", ember::cuda::runtime_version().str().c_str());
  std::printf("CUDA driver:           %s\n", ember::cuda::driver_version().str().c_str());
  std::printf("cuDNN:                 %s\n", ember::cuda::cudnn_version().str().c_str());
  std::printf("cuBLAS:                %s\n", ember::cuda::cublas_version().str().c_str());
  ember::cuda::Version nccl = ember::cuda::nccl_version();
  std::printf("NCCL:                  %s\n", nccl.available() ? nccl.str().c_str() : "not built");
  std::printf("CUDA available:        %s\n", ember::cuda::is_available() ? "yes" : "no");
#ifdef EMBER_WITH_CUDA
  try {
    ember::cuda::current_device();
  } catch (const ember::Error& e) {  // the reason, as the first use of a device would say it
    std::printf("  why not:             %s\n", e.what());
  }
#endif
  std::printf("CUDA devices:          %d\n", ember::cuda::device_count());
  report_devices();
  std::printf("CPU threads:           %d\n", ember::get_num_threads());
  std::printf("registered ops:        %zu\n", ember::registered_ops().size());
  return 0;
}
