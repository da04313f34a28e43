#pragma once

#include <memory>

#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

namespace ember::distributed {

// Whether ember was built with NCCL (torch.distributed.is_nccl_available()).
bool is_nccl_available();

struct ProcessGroupNCCLOptions : ProcessGroup::Options {
  // How often the watchdog looks at the running collectives (completion, NCCL's asynchronous
  // errors, timeouts).
  std::chrono::milliseconds watchdog_interval{100};
  // The device barrier() uses while no collective has picked one (-1: the current device).
  // init_process_group sets LOCAL_RANK's device.
  int device = -1;
};

// A process group over NCCL for CUDA tensors. Rank 0 makes the unique id of each communicator
// and shares it through `store` (one the group has to itself: a PrefixStore). A communicator per
// device is made on the group's first collective there; collectives run on an NCCL stream of
// that device which waits for the current stream first, and Work::wait() makes the current
// stream wait for the collective (without blocking the host). A watchdog thread aborts the
// communicators (ncclCommAbort) when a collective times out or NCCL reports an error; the
// Works then fail with that error. Sets NCCL_NVLS_ENABLE=0 unless the environment sets it.
// Throws when ember was built without NCCL.
std::shared_ptr<ProcessGroup> make_process_group_nccl(std::shared_ptr<Store> store, int rank, int size,
                                                      ProcessGroupNCCLOptions options = {});

}  // namespace ember::distributed
