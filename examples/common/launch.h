#pragma once

// Where a trainer's process runs: its rank in the job (emberrun's environment; a plain run is
// rank 0 of 1) and its device. With several processes it joins the default process group (NCCL
// on GPUs, Gloo on CPUs), so the trainer wraps its model in DistributedDataParallel.
#include <string>

#include <ember/core/device.h>

namespace ember::examples {

struct Launch {
  int rank = 0, world_size = 1, local_rank = 0;
  Device device{kCPU};
  bool distributed() const { return world_size > 1; }
  // The process that prints, writes metrics and checkpoints.
  bool is_main() const { return rank == 0; }
};

// `device`: "cpu", "cuda", or empty for the GPU when there is one. Each process of a job on GPUs
// takes the GPU of its LOCAL_RANK.
Launch init_launch(const std::string& device);

}  // namespace ember::examples
