// Built instead of distributed/nccl/ when ember is configured without CUDA or NCCL.
#include "ember/distributed/process_group_nccl.h"

#include "ember/core/error.h"

namespace ember::distributed {

bool is_nccl_available() { return false; }

std::shared_ptr<ProcessGroup> make_process_group_nccl(std::shared_ptr<Store>, int, int,
                                                      ProcessGroupNCCLOptions) {
  throw Error(
      "ProcessGroupNCCL: ember was built without NCCL (it needs the CUDA backend and nccl.h/libnccl; "
      "configure "
      "with -DEMBER_NCCL=ON)");
}

}  // namespace ember::distributed
