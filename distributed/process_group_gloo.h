#pragma once

#include <memory>
#include <string>

#include "ember/distributed/process_group.h"
#include "ember/distributed/store.h"

namespace ember::distributed {

// Whether ember was built with Gloo (torch.distributed.is_gloo_available()).
bool is_gloo_available();

struct ProcessGroupGlooOptions : ProcessGroup::Options {
  // Where this process listens for its peers: a network interface ("eth0"; the environment's
  // GLOO_SOCKET_IFNAME when empty) or else a host name or address ("127.0.0.1"; the machine's
  // host name when both are empty).
  std::string interface;
  std::string hostname;
};

// A process group over Gloo's TCP transport, for CPU tensors of every dtype (reductions: all
// but bool). Collectives run in order on a worker thread of the group; send/recv run beside
// them. The members rendezvous through `store` (one the group has to itself: a PrefixStore).
// Throws when ember was built without Gloo.
std::shared_ptr<ProcessGroup> make_process_group_gloo(std::shared_ptr<Store> store, int rank, int size,
                                                      ProcessGroupGlooOptions options = {});

}  // namespace ember::distributed
