// Environment report, like `python -m torch.utils.collect_env`: what ember was built with and
// what it sees. Run: build/tools/env_report
#include <ember/ember.h>

#include <cstdio>

int main() {
#ifdef EMBER_WITH_CUDA
  const char* cuda_built = "yes";
#else
  const char* cuda_built = "no";
#endif
  std::printf("ember built with CUDA: %s\n", cuda_built);
  std::printf("CUDA available:        %s\n", ember::cuda::is_available() ? "yes" : "no");
  std::printf("CUDA devices:          %d\n", ember::cuda::device_count());
  std::printf("CPU threads:           %d\n", ember::get_num_threads());
  std::printf("registered ops:        %zu\n", ember::registered_ops().size());
  return 0;
}
