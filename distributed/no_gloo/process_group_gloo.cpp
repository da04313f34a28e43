// Built instead of distributed/gloo/ when ember is configured without Gloo.
#include "ember/distributed/process_group_gloo.h"

#include "ember/core/error.h"

namespace ember::distributed {

bool is_gloo_available() { return false; }

std::shared_ptr<ProcessGroup> make_process_group_gloo(std::shared_ptr<Store>, int, int,
                                                      ProcessGroupGlooOptions) {
  throw Error(
      "ProcessGroupGloo: ember was built without Gloo (install libgloo-dev and configure with "
      "-DEMBER_GLOO=ON)");
}

}  // namespace ember::distributed
