#pragma once

// torch.distributed in C++: the default process group and collectives on it.
//
//   distributed::init_process_group("gloo");   // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from env
//   distributed::all_reduce(t);                // sum over every rank, in place
//
// Ranks passed to the free functions (src, dst, new_group's list) are global ranks, as in
// PyTorch; a group's own ProcessGroup methods take ranks within the group.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"
#include "ember/distributed/process_group_gloo.h"
#include "ember/distributed/process_group_nccl.h"
#include "ember/distributed/store.h"
#include "ember/distributed/tcp_store.h"

namespace ember::distributed {

struct InitOptions {
  int rank = -1;                 // -1: the environment's RANK
  int local_rank = -1;           // -1: LOCAL_RANK (0 when unset); NCCL's barrier uses this GPU
  int world_size = -1;           // -1: WORLD_SIZE
  std::string master_addr;       // empty: MASTER_ADDR
  int master_port = -1;          // -1: MASTER_PORT
  std::shared_ptr<Store> store;  // given: rendezvous through it instead of a TCPStore
  std::chrono::milliseconds timeout = ProcessGroup::kDefaultTimeout;
};

// Creates the default group of every process of the job (backend "gloo" or "nccl"). Rank 0
// hosts the TCPStore at MASTER_ADDR:MASTER_PORT, unless emberrun already hosts it
// (EMBER_USE_AGENT_STORE=1). Keys are kept apart per restart (RESTART_COUNT).
void init_process_group(const std::string& backend, InitOptions options = {});
bool is_initialized();
void destroy_process_group(const std::shared_ptr<ProcessGroup>& group = nullptr);  // null: all groups

// The default group (torch.distributed.group.WORLD); throws when not initialized.
std::shared_ptr<ProcessGroup> default_group();
int get_rank(const std::shared_ptr<ProcessGroup>& group = nullptr);
int get_world_size(const std::shared_ptr<ProcessGroup>& group = nullptr);
// This process's rank on its node (torch.distributed.get_node_local_rank): LOCAL_RANK, which
// emberrun sets, else the default group's local rank, else fallback_rank; an error without any.
// Needs no process group, so it can pick the GPU before init_process_group.
int get_node_local_rank(std::optional<int> fallback_rank = std::nullopt);
std::string get_backend(const std::shared_ptr<ProcessGroup>& group = nullptr);
// Global rank -> rank within `group`, and back.
int get_group_rank(const std::shared_ptr<ProcessGroup>& group, int global_rank);
int get_global_rank(const std::shared_ptr<ProcessGroup>& group, int group_rank);

// A group of some of the ranks (all when empty), with the default group's backend. Every
// process calls it, members or not, in the same order; non-members get null.
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks = {},
                                        std::optional<std::chrono::milliseconds> timeout = std::nullopt);

// Collectives on the default group (or `group`): they wait unless async_op, and return the
// Work either way.
using GroupPtr = std::shared_ptr<ProcessGroup>;
std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM,
                                 const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const GroupPtr& group = nullptr,
                                bool async_op = false);
std::shared_ptr<Work> reduce(const Tensor& tensor, int dst, ReduceOp op = ReduceOp::SUM,
                             const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor,
                                 const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input,
                                             const GroupPtr& group = nullptr, bool async_op = false);
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list,
                                     ReduceOp op = ReduceOp::SUM, const GroupPtr& group = nullptr,
                                     bool async_op = false);
std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                            ReduceOp op = ReduceOp::SUM, const GroupPtr& group = nullptr,
                                            bool async_op = false);
std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& output_list,
                                 const std::vector<Tensor>& input_list, const GroupPtr& group = nullptr,
                                 bool async_op = false);
std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes = {},
                                        const std::vector<int64_t>& input_split_sizes = {},
                                        const GroupPtr& group = nullptr, bool async_op = false);
void send(const Tensor& tensor, int dst, const GroupPtr& group = nullptr, int tag = 0);
void recv(const Tensor& tensor, int src, const GroupPtr& group = nullptr, int tag = 0);
std::shared_ptr<Work> isend(const Tensor& tensor, int dst, const GroupPtr& group = nullptr, int tag = 0);
std::shared_ptr<Work> irecv(const Tensor& tensor, int src, const GroupPtr& group = nullptr, int tag = 0);
void barrier(const GroupPtr& group = nullptr);

}  // namespace ember::distributed
