#pragma once

// torch.distributed's object collectives, for C++ objects as byte strings: serialize first (for
// instance nlohmann::json::dump) and parse what comes back. Each call sends the sizes, then the
// bytes in one uint8 tensor per rank, padded to the longest; on a NCCL group they go through the
// current GPU, as PyTorch's do. Every rank of the group calls them, in the same order; src is a
// global rank.
//
//   std::vector<std::string> names;
//   distributed::all_gather_object(names, hostname);   // names[r] is rank r's hostname

#include <string>
#include <vector>

#include "ember/distributed/distributed.h"

namespace ember::distributed {

// object_list becomes every rank's obj, in group-rank order (torch.distributed.all_gather_object).
void all_gather_object(std::vector<std::string>& object_list, const std::string& obj,
                       const GroupPtr& group = nullptr);
// Every rank's object_list becomes src's (torch.distributed.broadcast_object_list; here the other
// ranks' lists may have any length, and are resized).
void broadcast_object_list(std::vector<std::string>& object_list, int src, const GroupPtr& group = nullptr);

}  // namespace ember::distributed
