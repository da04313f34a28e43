// emberrun: starts and watches the processes of a distributed job, like torchrun. See
// `emberrun --help` (options.cpp) for what it does; this file is the agent: rendezvous with
// the other nodes through the TCPStore node 0 hosts, start the workers, watch them and the
// other nodes, stop or restart them all together.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <ember/distributed/tcp_store.h>

#include "options.h"
#include "worker_group.h"

extern char** environ;

namespace emberrun {
namespace {

using Clock = std::chrono::steady_clock;
using ember::distributed::TCPStore;
using std::chrono::milliseconds;

template <class... Args>
void log(const char* fmt, Args... args) {
  std::fprintf(stderr, "emberrun: ");
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

milliseconds to_ms(double seconds) { return milliseconds(static_cast<int64_t>(seconds * 1000)); }

// --- Signals: the handlers only write into pipes the agent polls: the signal's number for
// those we forward, a byte for SIGCHLD (so that a worker's exit is seen at once). ---
int g_signal_pipe[2] = {-1, -1};
int g_child_pipe[2] = {-1, -1};

void on_signal(int sig) {
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(sig == SIGCHLD ? g_child_pipe[1] : g_signal_pipe[1], &c, 1);
}

void install_signal_handlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(g_child_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("pipe failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void drain_child_pipe() {
  char buf[64];
  while (read(g_child_pipe[0], buf, sizeof(buf)) > 0) {
  }
}

// The signal received since the last call, or 0.
int take_signal() {
  char c = 0;
  return read(g_signal_pipe[0], &c, 1) == 1 ? c : 0;
}

// Sleeps up to `d`, returning early (with the signal) when one arrives.
int sleep_or_signal(milliseconds d) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(d.count()));
  return take_signal();
}

struct Interrupted {
  int sig;
};

// Keys of one round (a first run or a restart) under "emberrun/round_K/".
struct Round {
  int index;
  std::string key(const std::string& k) const { return "emberrun/round_" + std::to_string(index) + "/" + k; }
};

struct Placement {
  int first_rank;  // global rank of this node's local rank 0
  int world_size;
};

// A node's registration: "host:pid|nproc_per_node|nnodes".
struct NodeEntry {
  std::string who;
  int nproc = 0, nnodes = 0;
};
NodeEntry parse_node_entry(const std::string& v) {
  const size_t a = v.find('|'), b = v.find('|', a + 1);
  return {v.substr(0, a), std::atoi(v.substr(a + 1).c_str()),
          b == std::string::npos ? 0 : std::atoi(v.substr(b + 1).c_str())};
}

// Every node joined so far must have been started for the same number of nodes: otherwise one
// waits for a node that never comes, and the other starts a world that cannot form.
void check_same_nnodes(TCPStore& store, const Options& o, const std::vector<std::string>& keys) {
  for (int n = 0; n < o.nnodes; ++n) {
    if (!store.check({keys[static_cast<size_t>(n)]})) continue;
    NodeEntry e = parse_node_entry(store.get(keys[static_cast<size_t>(n)]));
    if (e.nnodes != o.nnodes)
      throw std::runtime_error("node rank " + std::to_string(n) + " (" + e.who +
                               ") was started with --nnodes " + std::to_string(e.nnodes) +
                               ", this node with --nnodes " + std::to_string(o.nnodes) +
                               ": every node must be given the same --nnodes");
  }
}

// Every node registers how many workers it starts; once all nnodes are in, each knows its
// first global rank (the nodes before it, in node rank order) and the world size.
Placement rendezvous(TCPStore& store, const Options& o, const Round& round) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string me = std::string(host) + ":" + std::to_string(getpid()) + "|" +
                   std::to_string(o.nproc_per_node) + "|" + std::to_string(o.nnodes);
  std::string got = store.compare_set(round.key("node_" + std::to_string(o.node_rank)), "", me);
  if (got != me)
    throw std::runtime_error("another emberrun (" + got.substr(0, got.find('|')) +
                             ") already joined as node rank " + std::to_string(o.node_rank));
  std::vector<std::string> keys;
  for (int n = 0; n < o.nnodes; ++n) keys.push_back(round.key("node_" + std::to_string(n)));
  // A node of a larger --nnodes also registers under node ranks this node does not wait for.
  const std::string beyond = round.key("node_" + std::to_string(o.nnodes));
  auto deadline = Clock::now() + to_ms(o.rdzv_timeout);
  while (!store.check(keys)) {
    check_same_nnodes(store, o, keys);
    if (store.check({beyond}))
      throw std::runtime_error("a node registered as node rank " + std::to_string(o.nnodes) +
                               ", but this node was started with --nnodes " + std::to_string(o.nnodes) +
                               ": every node must be given the same --nnodes");
    if (Clock::now() >= deadline) {
      int joined = 0;
      for (const auto& k : keys) joined += store.check({k});
      throw std::runtime_error("only " + std::to_string(joined) + " of " + std::to_string(o.nnodes) +
                               " nodes joined within " + std::to_string(o.rdzv_timeout) + " s");
    }
    if (int sig = sleep_or_signal(milliseconds(20))) throw Interrupted{sig};
  }
  check_same_nnodes(store, o, keys);
  Placement p{0, 0};
  for (int n = 0; n < o.nnodes; ++n) {
    const int nproc = parse_node_entry(store.get(keys[static_cast<size_t>(n)])).nproc;
    if (n < o.node_rank) p.first_rank += nproc;
    p.world_size += nproc;
  }
  return p;
}

std::vector<WorkerSpec> worker_specs(const Options& o, const Placement& p, int store_port, int restart) {
  std::map<std::string, std::string> base;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) base[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  base.try_emplace("NCCL_NVLS_ENABLE", "0");
  if (o.nproc_per_node > 1) base.try_emplace("OMP_NUM_THREADS", "1");
  base["WORLD_SIZE"] = std::to_string(p.world_size);
  base["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  base["GROUP_RANK"] = std::to_string(o.node_rank);
  base["MASTER_ADDR"] = o.master_addr;
  base["MASTER_PORT"] = std::to_string(store_port);
  base["RESTART_COUNT"] = std::to_string(restart);
  base["TORCHELASTIC_RUN_ID"] = o.rdzv_id;
  base["EMBER_USE_AGENT_STORE"] = "1";
  std::vector<WorkerSpec> specs;
  for (int l = 0; l < o.nproc_per_node; ++l) {
    auto env = base;
    env["LOCAL_RANK"] = std::to_string(l);
    env["RANK"] = std::to_string(p.first_rank + l);
    WorkerSpec s{p.first_rank + l, {}, o.console_streams(l)};
    for (const auto& [k, v] : env) s.env.push_back(k + "=" + v);
    specs.push_back(std::move(s));
  }
  return specs;
}

enum class Outcome { kSuccess, kFailure, kInterrupted };
struct Result {
  Outcome outcome;
  int code;
};

// The first failure of a round, "<exit code> <global rank> <node rank>" in the store: all nodes
// exit with its code. Rank -1: an emberrun stopped by a signal.
struct Failure {
  int code = 0, rank = 0, node = 0;
};

Failure parse_failure(const std::string& s) {
  Failure f;
  std::sscanf(s.c_str(), "%d %d %d", &f.code, &f.rank, &f.node);
  return f;
}

// Records `mine` unless a failure came first; returns the first one.
Failure record_failure(TCPStore& store, const Round& round, const Failure& mine) {
  std::string text =
      std::to_string(mine.code) + " " + std::to_string(mine.rank) + " " + std::to_string(mine.node);
  return parse_failure(store.compare_set(round.key("failed"), "", text));
}

void log_first_failure(const Failure& f) {
  if (f.rank < 0)
    log("emberrun on node %d was stopped by a signal (code %d); stopping the workers", f.node, f.code);
  else
    log("rank %d on node %d failed (code %d); stopping the workers", f.rank, f.node, f.code);
}

// Watches this node's workers (at once: their exits wake us) and the other nodes (through the
// store, once per monitor interval) until the round ends. A failure is recorded in the store
// before stopping the workers, so the other nodes start stopping theirs at the same time.
Result watch(WorkerGroup& group, TCPStore& store, const Options& o, const Round& round) {
  auto interval = to_ms(o.monitor_interval);
  auto grace = to_ms(o.grace_period);
  bool local_done = false;
  auto next_check = Clock::now();
  for (;;) {
    auto exits = group.poll(interval, {g_signal_pipe[0], g_child_pipe[0]});
    drain_child_pipe();
    if (int sig = take_signal()) {
      log("got signal %d: stopping the workers", sig);
      record_failure(store, round, {128 + sig, -1, o.node_rank});
      group.stop(sig, grace);
      return {Outcome::kInterrupted, 128 + sig};
    }
    for (const auto& e : exits) {
      if (e.code == 0) continue;
      if (e.code > 128)
        log("rank %d (pid %d) was killed by signal %d; stopping the other workers", e.global_rank, e.pid,
            e.code - 128);
      else
        log("rank %d (pid %d) exited with code %d; stopping the other workers", e.global_rank, e.pid, e.code);
      // A failure elsewhere may have come first (and caused this one: a peer gone mid-connect).
      Failure first = record_failure(store, round, {e.code, e.global_rank, o.node_rank});
      if (first.rank != e.global_rank || first.node != o.node_rank) log_first_failure(first);
      group.stop(SIGTERM, grace);
      return {Outcome::kFailure, first.code};
    }
    if (!local_done && group.all_exited()) {
      local_done = true;
      store.add(round.key("done"), 1);
    }
    if (Clock::now() < next_check) continue;
    next_check = Clock::now() + interval;
    if (store.check({round.key("failed")})) {
      Failure first = parse_failure(store.get(round.key("failed")));
      if (!local_done) log_first_failure(first);
      group.stop(SIGTERM, grace);
      return {Outcome::kFailure, first.code};
    }
    if (local_done && store.add(round.key("done"), 0) >= o.nnodes) return {Outcome::kSuccess, 0};
  }
}

// Where --redirects and --tee without --log-dir put the log files, as torchrun does.
std::string make_temp_log_dir() {
  std::string dir = (std::filesystem::temp_directory_path() / "emberrun_XXXXXX").string();
  if (!mkdtemp(dir.data())) throw std::runtime_error("cannot create " + dir + ": " + std::strerror(errno));
  log("--redirects/--tee without --log-dir: the log files go to %s", dir.c_str());
  return dir;
}

// 128 random bits as hex: the secret a single-node job's store asks of every connection.
std::string random_token() {
  std::random_device rd;  // the kernel's getrandom
  std::string hex;
  char buf[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    hex += buf;
  }
  return hex;
}

int run(const Options& o) {
  std::string path = resolve_program(o.program[0]);
  // The store (this process's and the workers', through the environment) admits only this job.
  // A multi-node job takes a token given as EMBER_STORE_TOKEN on every node.
  if (o.nnodes == 1 && !std::getenv("EMBER_STORE_TOKEN"))
    setenv("EMBER_STORE_TOKEN", random_token().c_str(), 1);
  std::string log_dir = o.log_dir;
  if (!log_dir.empty())
    std::filesystem::create_directories(log_dir);
  else if (o.wants_log_files())
    log_dir = make_temp_log_dir();
  std::optional<TCPStore> store;
  // Node 0 hosts the store; the others retry connecting while it comes up.
  store.emplace(o.master_addr, o.master_port, std::nullopt, o.node_rank == 0, to_ms(o.rdzv_timeout));
  int port = store->port();
  Result result{Outcome::kFailure, 1};
  for (int restart = 0;; ++restart) {
    Round round{restart};
    Placement p = rendezvous(*store, o, round);
    if (restart == 0 && o.node_rank == 0)
      log("%d processes on %d node(s), store at %s:%d", p.world_size, o.nnodes, o.master_addr.c_str(), port);
    {
      WorkerGroup group(path, o.program, worker_specs(o, p, port, restart), log_dir, restart == 0);
      result = watch(group, *store, o, round);
    }
    store->add(round.key("stopped"), 1);
    if (result.outcome != Outcome::kFailure || restart >= o.max_restarts) {
      // Node 0's store must outlive the other agents' last look at it.
      if (o.node_rank == 0) {
        auto deadline = Clock::now() + std::chrono::seconds(30);
        while (store->add(round.key("stopped"), 0) < o.nnodes && Clock::now() < deadline)
          if (sleep_or_signal(milliseconds(20))) break;
      }
      if (result.outcome == Outcome::kFailure && o.max_restarts > 0)
        log("no restarts left (%d used)", restart);
      return result.code;
    }
    log("restarting the workers (restart %d of %d)", restart + 1, o.max_restarts);
  }
}

}  // namespace
}  // namespace emberrun

int main(int argc, char** argv) {
  using namespace emberrun;
  Options o;
  try {
    if (!parse_options(argc, argv, o)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "emberrun: %s (see emberrun --help)\n", e.what());
    return 2;
  }
  try {
    install_signal_handlers();
    return run(o);
  } catch (const Interrupted& i) {
    log("got signal %d before the workers started", i.sig);
    return 128 + i.sig;
  } catch (const std::exception& e) {
    log("%s", e.what());
    return 1;
  }
}
