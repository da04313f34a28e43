#include "ember/distributed/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "ember/core/error.h"
#include "ember/cuda/device.h"

namespace ember::distributed {
namespace {

// The default group and the groups made from it (torch.distributed's world): the one piece of
// process-wide state, as in PyTorch.
// What a new group of the world's backend is made with.
struct BackendSettings {
  std::string backend;        // "gloo" or "nccl"
  std::string gloo_hostname;  // where Gloo listens ("127.0.0.1" when the master is on loopback)
  int local_rank = 0;         // NCCL's barrier uses this process's GPU
};

struct World {
  std::mutex mu;
  BackendSettings settings;
  std::shared_ptr<Store> store;  // the job's store, under this restart's prefix
  std::shared_ptr<ProcessGroup> default_group;
  std::map<const ProcessGroup*, std::vector<int>> global_ranks;  // group -> its members' global ranks
  int groups_made = 0;
  std::chrono::milliseconds timeout{};
};

World& world() {
  static World w;
  return w;
}

// The non-negative integer in environment variable `name`; `op` names the caller in errors.
int parse_env(const char* op, const char* name, const char* v) {
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  EMBER_CHECK(*end == '\0' && n >= 0 && n < (1 << 30), op, ": ", name, "='", v,
              "' is not a non-negative integer");
  return static_cast<int>(n);
}

int env_int(const char* name, int given, const char* what) {
  if (given >= 0) return given;
  const char* v = std::getenv(name);
  EMBER_CHECK(v && *v, "init_process_group: ", what, " is not given and ", name,
              " is not set (emberrun sets it; or pass it in InitOptions)");
  return parse_env("init_process_group", name, v);
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.starts_with("127.") || addr == "::1";
}

std::shared_ptr<ProcessGroup> make_group(const BackendSettings& s, std::shared_ptr<Store> store, int rank,
                                         int size, std::chrono::milliseconds timeout) {
  if (s.backend == "gloo") {
    ProcessGroupGlooOptions o;
    o.timeout = timeout;
    o.hostname = s.gloo_hostname;
    return make_process_group_gloo(std::move(store), rank, size, o);
  }
  ProcessGroupNCCLOptions o;
  o.timeout = timeout;
  int gpus = cuda::device_count();
  o.device = gpus > 0 ? s.local_rank % gpus : -1;
  return make_process_group_nccl(std::move(store), rank, size, o);
}

const std::shared_ptr<ProcessGroup>& require_default(const char* op) {
  World& w = world();
  EMBER_CHECK(w.default_group, op,
              ": the default process group is not initialized (call init_process_group first)");
  return w.default_group;
}

// The group a free function works on: `group` or the default one.
std::shared_ptr<ProcessGroup> resolve(const GroupPtr& group, const char* op) {
  std::lock_guard<std::mutex> lock(world().mu);
  return group ? group : require_default(op);
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

void init_process_group(const std::string& backend, InitOptions options) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  EMBER_CHECK(!w.default_group, "init_process_group: already initialized (call destroy_process_group first)");
  EMBER_CHECK(backend == "gloo" || backend == "nccl", "init_process_group: unknown backend '", backend,
              "' (expected 'gloo' or 'nccl')");
  int rank = env_int("RANK", options.rank, "rank");
  int size = env_int("WORLD_SIZE", options.world_size, "world_size");
  const char* local = std::getenv("LOCAL_RANK");
  bool local_from_env = options.local_rank < 0 && local && *local;
  int local_rank = local_from_env ? env_int("LOCAL_RANK", -1, "local_rank") : std::max(options.local_rank, 0);
  EMBER_CHECK(size >= 1 && rank < size, "init_process_group: rank ", rank, " is not in [0, ", size,
              ") (world size ", size, ")");
  std::shared_ptr<Store> store = options.store;
  std::string master_addr = options.master_addr;
  if (!store) {
    if (master_addr.empty()) {
      const char* v = std::getenv("MASTER_ADDR");
      EMBER_CHECK(v && *v,
                  "init_process_group: master_addr is not given and MASTER_ADDR is not set (emberrun "
                  "sets it; or pass it in InitOptions)");
      master_addr = v;
    }
    int port = env_int("MASTER_PORT", options.master_port, "master_port");
    const char* agent = std::getenv("EMBER_USE_AGENT_STORE");
    bool agent_store = agent && std::string(agent) == "1";
    store = agent_store ? std::make_shared<TCPStore>(master_addr, port, std::nullopt, false, options.timeout)
                        : std::make_shared<TCPStore>(master_addr, port, size, rank == 0, options.timeout);
  }
  const char* restart = std::getenv("RESTART_COUNT");
  store = std::make_shared<PrefixStore>(std::string("ember/restart_") + (restart && *restart ? restart : "0"),
                                        std::move(store));
  BackendSettings settings{backend, is_loopback(master_addr) ? "127.0.0.1" : "", local_rank};
  w.default_group =
      make_group(settings, std::make_shared<PrefixStore>("default_pg", store), rank, size, options.timeout);
  w.settings = settings;
  w.store = std::move(store);
  w.timeout = options.timeout;
  w.groups_made = 0;
  std::vector<int> all(size);
  for (int i = 0; i < size; ++i) all[i] = i;
  w.global_ranks[w.default_group.get()] = std::move(all);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().default_group != nullptr;
}

void destroy_process_group(const std::shared_ptr<ProcessGroup>& group) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  if (group && group != w.default_group) {
    w.global_ranks.erase(group.get());
    return;
  }
  require_default("destroy_process_group");
  w.default_group.reset();
  w.global_ranks.clear();
  w.store.reset();
  w.settings = {};
}

std::shared_ptr<ProcessGroup> default_group() {
  std::lock_guard<std::mutex> lock(world().mu);
  return require_default("default_group");
}

int get_rank(const GroupPtr& group) {
  auto g = resolve(group, "get_rank");
  return g->rank();
}

int get_world_size(const GroupPtr& group) { return resolve(group, "get_world_size")->size(); }

int get_node_local_rank(std::optional<int> fallback_rank) {
  if (const char* v = std::getenv("LOCAL_RANK"); v && *v)
    return parse_env("get_node_local_rank", "LOCAL_RANK", v);
  {
    std::lock_guard<std::mutex> lock(world().mu);
    if (world().default_group) return world().settings.local_rank;
  }
  EMBER_CHECK(fallback_rank,
              "get_node_local_rank: LOCAL_RANK is not set (emberrun sets it) and no process group "
              "is initialized; pass a fallback_rank to run outside a launcher");
  return *fallback_rank;
}

std::string get_backend(const GroupPtr& group) { return resolve(group, "get_backend")->backend_name(); }

namespace {

const std::vector<int>& members(const GroupPtr& group, const char* op) {
  World& w = world();
  auto it = w.global_ranks.find(group.get());
  EMBER_CHECK(it != w.global_ranks.end(), op,
              ": the group is not known (destroyed, or not made by new_group)");
  return it->second;
}

}  // namespace

int get_group_rank(const GroupPtr& group, int global_rank) {
  auto g = resolve(group, "get_group_rank");
  std::lock_guard<std::mutex> lock(world().mu);
  const auto& ranks = members(g, "get_group_rank");
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  EMBER_CHECK(it != ranks.end(), "get_group_rank: global rank ", global_rank, " is not in the group (ranks ",
              IntArrayRef(std::vector<int64_t>(ranks.begin(), ranks.end())), ")");
  return static_cast<int>(it - ranks.begin());
}

int get_global_rank(const GroupPtr& group, int group_rank) {
  auto g = resolve(group, "get_global_rank");
  std::lock_guard<std::mutex> lock(world().mu);
  const auto& ranks = members(g, "get_global_rank");
  EMBER_CHECK(group_rank >= 0 && group_rank < static_cast<int>(ranks.size()), "get_global_rank: group rank ",
              group_rank, " is not in [0, ", ranks.size(), ")");
  return ranks[group_rank];
}

std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks,
                                        std::optional<std::chrono::milliseconds> timeout) {
  World& w = world();
  std::unique_lock<std::mutex> lock(w.mu);
  const auto& world_group = require_default("new_group");
  int size = world_group->size(), me = world_group->rank();
  if (ranks.empty()) {
    for (int i = 0; i < size; ++i) ranks.push_back(i);
  }
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    EMBER_CHECK(ranks[i] >= 0 && ranks[i] < size, "new_group: rank ", ranks[i], " is not in [0, ", size, ")");
    EMBER_CHECK(i == 0 || ranks[i] != ranks[i - 1], "new_group: rank ", ranks[i], " is listed twice");
  }
  // Every process counts the group, member or not, so the next group gets the same name everywhere.
  int id = ++w.groups_made;
  auto it = std::find(ranks.begin(), ranks.end(), me);
  if (it == ranks.end()) return nullptr;
  auto store = std::make_shared<PrefixStore>("group_" + std::to_string(id), w.store);
  BackendSettings settings = w.settings;
  auto t = timeout.value_or(w.timeout);
  lock.unlock();  // connecting waits for the other members
  auto group = make_group(settings, std::move(store), static_cast<int>(it - ranks.begin()),
                          static_cast<int>(ranks.size()), t);
  lock.lock();
  w.global_ranks[group.get()] = std::move(ranks);
  return group;
}

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, const GroupPtr& group, bool async_op) {
  return finish(resolve(group, "all_reduce")->all_reduce(tensor, op), async_op);
}

std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const GroupPtr& group, bool async_op) {
  auto g = resolve(group, "broadcast");
  return finish(g->broadcast(tensor, get_group_rank(g, src)), async_op);
}

std::shared_ptr<Work> reduce(const Tensor& tensor, int dst, ReduceOp op, const GroupPtr& group,
                             bool async_op) {
  auto g = resolve(group, "reduce");
  return finish(g->reduce(tensor, get_group_rank(g, dst), op), async_op);
}

std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor,
                                 const GroupPtr& group, bool async_op) {
  return finish(resolve(group, "all_gather")->all_gather(tensor_list, tensor), async_op);
}

std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input, const GroupPtr& group,
                                             bool async_op) {
  return finish(resolve(group, "all_gather_into_tensor")->all_gather_into_tensor(output, input), async_op);
}

std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op,
                                     const GroupPtr& group, bool async_op) {
  return finish(resolve(group, "reduce_scatter")->reduce_scatter(output, input_list, op), async_op);
}

std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                                            const GroupPtr& group, bool async_op) {
  return finish(resolve(group, "reduce_scatter_tensor")->reduce_scatter_tensor(output, input, op), async_op);
}

std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& output_list,
                                 const std::vector<Tensor>& input_list, const GroupPtr& group,
                                 bool async_op) {
  return finish(resolve(group, "all_to_all")->all_to_all(output_list, input_list), async_op);
}

std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes, const GroupPtr& group,
                                        bool async_op) {
  return finish(resolve(group, "all_to_all_single")
                    ->all_to_all_single(output, input, output_split_sizes, input_split_sizes),
                async_op);
}

std::shared_ptr<Work> isend(const Tensor& tensor, int dst, const GroupPtr& group, int tag) {
  auto g = resolve(group, "isend");
  return g->send(tensor, get_group_rank(g, dst), tag);
}

std::shared_ptr<Work> irecv(const Tensor& tensor, int src, const GroupPtr& group, int tag) {
  auto g = resolve(group, "irecv");
  return g->recv(tensor, get_group_rank(g, src), tag);
}

void send(const Tensor& tensor, int dst, const GroupPtr& group, int tag) {
  isend(tensor, dst, group, tag)->wait();
}

void recv(const Tensor& tensor, int src, const GroupPtr& group, int tag) {
  irecv(tensor, src, group, tag)->wait();
}

void barrier(const GroupPtr& group) { resolve(group, "barrier")->barrier()->wait(); }

}  // namespace ember::distributed
