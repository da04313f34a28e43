#include "ember/examples/common/launch.h"

#include <cstdlib>

#include <ember/cuda/device.h>
#include <ember/distributed/distributed.h>

namespace ember::examples {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

Launch init_launch(const std::string& device) {
  Launch l;
  l.world_size = env_int("WORLD_SIZE", 1);
  l.rank = env_int("RANK", 0);
  l.local_rank = env_int("LOCAL_RANK", 0);
  const bool gpu = device.empty() ? cuda::is_available() : Device(device).is_cuda();
  l.device = gpu ? Device(kCUDA, l.world_size > 1 ? l.local_rank : 0) : Device(kCPU);
  if (gpu) cuda::set_device(l.device.index);
  if (l.distributed()) {
    distributed::init_process_group(gpu ? "nccl" : "gloo");
    l.rank = distributed::get_rank();
    l.world_size = distributed::get_world_size();
  }
  return l;
}

}  // namespace ember::examples
