#include "options.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <ember/cuda/device.h>

namespace emberrun {

const char* const kUsage = R"(usage: emberrun [options] program [args...]

Starts --nproc-per-node copies of `program` on this node (like torchrun) and watches them.
Each copy gets, in its environment:
  RANK              its rank in the whole job: node offset + LOCAL_RANK
  LOCAL_RANK        its rank on this node, 0 .. nproc-per-node - 1
  WORLD_SIZE        number of processes in the job (all nodes)
  LOCAL_WORLD_SIZE  number of processes on this node
  GROUP_RANK        this node's rank (--node-rank)
  MASTER_ADDR       where the job's store runs (--master-addr)
  MASTER_PORT       the store's port (the one picked when --master-port is 0)
  RESTART_COUNT     how many times the job has been restarted (0 at first)
  TORCHELASTIC_RUN_ID  --rdzv-id
  EMBER_USE_AGENT_STORE=1   init_process_group connects to emberrun's store instead of
                    starting one on rank 0
  EMBER_STORE_TOKEN the secret every connection to the store must present: a random one for a
                    single-node job (whose store listens on 127.0.0.1 alone); a multi-node job
                    uses the one set on every node, or none
  NCCL_NVLS_ENABLE=0, OMP_NUM_THREADS=1 (with more than one process per node)  unless set
ember's distributed::init_process_group reads them.

The node with --node-rank 0 hosts the job's TCPStore at --master-addr:--master-port; the
emberrun of every node registers there and waits for --nnodes of them (the rendezvous),
which gives each node its first global rank. Each copy runs in its own process group with
its output piped through emberrun: every line goes to the console prefixed with "[rank N]: "
(stdout to stdout, stderr to stderr; --redirects and --local-ranks-filter hold some back)
and, with --log-dir, unprefixed to DIR/rank_N.log (both streams).

When a copy fails (non-zero exit or a signal) on any node, every emberrun sends SIGTERM to
its copies, then SIGKILL after the grace period, and then either restarts the whole job
(all nodes together, RESTART_COUNT + 1) while restarts remain, or exits with the failed
copy's exit code (128 + N when signal N ended it). SIGINT and SIGTERM sent to emberrun are
forwarded to the copies, which are then stopped the same way; emberrun then exits with
128 + the signal. The copies die with emberrun even if it is killed (PR_SET_PDEATHSIG).
emberrun exits 0 once the copies of every node have exited 0.

options:
  --nproc-per-node N      processes to start on this node (default 1), or torchrun's words:
                          gpu: one per GPU (an error without GPUs); cpu: one per CPU core;
                          auto: one per GPU, or one per CPU core without GPUs (as torchrun).
                          The GPUs: ember::cuda::device_count(), 0 in a build without CUDA
  --nnodes M              nodes in the job (default 1); torchrun's MIN:MAX only with MIN = MAX:
                          emberrun's jobs are not elastic
  --node-rank R           this node's rank, 0 .. M-1 (default 0)
  --master-addr A         address of node 0, where the store runs (default 127.0.0.1)
  --master-port P         port of the store (default 29500; 0 picks a free port, one node only)
  --standalone            one node with its store at a free port of 127.0.0.1: --master-addr
                          127.0.0.1 --master-port 0, over those and --rdzv-endpoint
  --rdzv-endpoint H[:P]   --master-addr H --master-port P, over those in any order (P 29400
                          when left out, as in torchrun; IPv6 as [::1]:P)
  --rdzv-backend B        c10d or static (default): both are the rendezvous above. torchrun's
                          c10d hands out node ranks itself; emberrun does not, so c10d with
                          --nnodes above 1 needs --node-rank on each node (node 0 at H)
  --rdzv-id ID            only passed on to the copies, as TORCHELASTIC_RUN_ID (default none)
  --max-restarts K        restarts of the whole job after a failure (default 0)
  --log-dir D             also write each rank's output to D/rank_N.log (D is created)
  -r, --redirects V       the copies' streams that go to the log files only, not the console:
                          0 none (default), 1 stdout, 2 stderr, 3 both; for every local rank,
                          or per local rank as "0:3,1:2" (the local ranks left out: 0)
  -t, --tee V             the streams that go to the log files and the console (the same
                          form). The log files always hold both streams, so --tee only asks
                          for log files: the console shows what --redirects leaves it
  --local-ranks-filter L  the local ranks whose output the console shows ("0,1"; default all);
                          the log files still get everything
  --no-python             accepted and ignored: emberrun runs the program itself, never Python
  --monitor-interval S    seconds between checks of the copies and the other nodes (default 0.1)
  --grace-period S        seconds between SIGTERM and SIGKILL when stopping copies (default 5)
  --rdzv-timeout S        seconds to wait for the other nodes at each rendezvous (default 300)
  -h, --help              this text
Options also take the form --name=value, and torchrun's underscores (--nproc_per_node).
Everything after the program (or after --) goes to the program unchanged.
With --redirects or --tee but no --log-dir, the log files go to a new directory in $TMPDIR
(or /tmp), named on stderr, as torchrun does. torchrun's other options (--rdzv-conf, -m,
--start-method, --local-addr, ...) are unknown options here.

examples:
  emberrun --nproc-per-node 4 ./train --epochs 10
  emberrun --standalone --nnodes=1 --nproc-per-node=gpu ./train    # torchrun's spelling
  # two nodes, run on each with its own --node-rank:
  emberrun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 \
           --nproc-per-node 8 ./train
)";

namespace {

int to_int(const std::string& name, const std::string& v, int min, const std::string& or_else = "") {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < min || n > (1 << 30))
    throw std::invalid_argument(name + " needs an integer >= " + std::to_string(min) + or_else + ", got '" +
                                v + "'");
  return static_cast<int>(n);
}

double to_seconds(const std::string& name, const std::string& v) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(s > 0))
    throw std::invalid_argument(name + " needs a positive number of seconds, got '" + v + "'");
  return s;
}

// Splits "a,b,c" (an empty string gives one empty piece).
std::vector<std::string> split(const std::string& v, char sep) {
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t at; (at = v.find(sep, start)) != std::string::npos; start = at + 1)
    pieces.push_back(v.substr(start, at - start));
  pieces.push_back(v.substr(start));
  return pieces;
}

int to_nproc_per_node(const std::string& v) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (v == "cpu") return cores;
  if (v == "gpu" || v == "auto") {
    if (int gpus = ember::cuda::device_count(); gpus > 0) return gpus;
    if (v == "gpu")
      throw std::invalid_argument("--nproc-per-node gpu: no GPU found (or ember was built without CUDA)");
    return cores;
  }
  return to_int("--nproc-per-node", v, 1, " (or gpu, cpu, auto)");
}

// torchrun's MIN:MAX is an elastic job; only a fixed size fits emberrun.
int to_nnodes(const std::string& v) {
  auto range = split(v, ':');
  if (range.size() > 2) throw std::invalid_argument("--nnodes needs M or MIN:MAX, got '" + v + "'");
  int min = to_int("--nnodes", range[0], 1);
  if (range.size() == 2 && to_int("--nnodes", range[1], 1) != min)
    throw std::invalid_argument("--nnodes " + v +
                                ": emberrun runs a fixed number of nodes, not an elastic MIN:MAX range");
  return min;
}

// torchrun's HOST[:PORT] and [IPV6]:PORT; its c10d port when there is none.
std::pair<std::string, int> to_endpoint(const std::string& v) {
  std::string host = v;
  std::optional<std::string> port;
  const std::string bad = "--rdzv-endpoint needs HOST[:PORT], got '" + v + "'";
  if (!v.empty() && v[0] == '[') {
    size_t close = v.find(']');
    if (close == std::string::npos || (close + 1 < v.size() && v[close + 1] != ':'))
      throw std::invalid_argument(bad);
    host = v.substr(1, close - 1);
    if (close + 1 < v.size()) port = v.substr(close + 2);
  } else if (size_t colon = v.rfind(':'); colon != std::string::npos) {
    host = v.substr(0, colon);
    port = v.substr(colon + 1);
  }
  if (host.empty()) throw std::invalid_argument(bad);
  int p = port ? to_int("--rdzv-endpoint's port", *port, 0) : 29400;
  if (p > 65535) throw std::invalid_argument("--rdzv-endpoint's port " + *port + " is above 65535");
  return {host, p};
}

StdStreams to_std_streams(const std::string& name, const std::string& v) {
  auto bad = [&] {
    return std::invalid_argument(name + " needs 0-3, or LOCAL_RANK:0-3 pairs like 0:3,1:2, got '" + v + "'");
  };
  auto stream = [&](const std::string& s) {
    if (s.size() != 1 || s[0] < '0' || s[0] > '3') throw bad();
    return s[0] - '0';
  };
  StdStreams out;
  if (v.find(':') == std::string::npos) {
    out.all = stream(v);
    return out;
  }
  for (const auto& pair : split(v, ',')) {
    auto kv = split(pair, ':');
    if (kv.size() != 2) throw bad();
    out.by_local_rank[to_int(name + "'s local rank", kv[0], 0)] = stream(kv[1]);
  }
  return out;
}

std::set<int> to_local_ranks(const std::string& v) {
  std::set<int> ranks;
  for (const auto& r : split(v, ','))
    ranks.insert(to_int("--local-ranks-filter", r, 0, " (a list like 0,1)"));
  return ranks;
}

// The option's long name (torchrun's underscores as dashes; -r and -t as --redirects and --tee)
// and its value when the argument holds one: "--name=value", "-r3", "-r=3".
std::pair<std::string, std::optional<std::string>> split_option(const std::string& arg) {
  if (arg.size() >= 2 && arg[1] != '-') {
    std::string name = arg[1] == 'r' ? "--redirects" : arg[1] == 't' ? "--tee" : "";
    if (name.empty()) throw std::invalid_argument("unknown option " + arg.substr(0, 2));
    std::string rest = arg.substr(2);
    if (rest.empty()) return {name, std::nullopt};
    return {name, rest[0] == '=' ? rest.substr(1) : rest};
  }
  size_t eq = arg.find('=');
  std::string name = arg.substr(0, eq);
  std::replace(name.begin(), name.end(), '_', '-');
  if (eq == std::string::npos) return {name, std::nullopt};
  return {name, arg.substr(eq + 1)};
}

}  // namespace

int StdStreams::of(int local_rank) const {
  auto it = by_local_rank.find(local_rank);
  return it != by_local_rank.end() ? it->second : all;
}

bool StdStreams::any() const {
  return all != 0 ||
         std::any_of(by_local_rank.begin(), by_local_rank.end(), [](auto& kv) { return kv.second; });
}

int Options::console_streams(int local_rank) const {
  if (!local_ranks_filter.empty() && !local_ranks_filter.count(local_rank)) return 0;
  return 3 & ~redirects.of(local_rank);
}

bool parse_options(int argc, char** argv, Options& o) {
  std::optional<std::pair<std::string, int>> endpoint;
  std::string backend = "static";
  bool standalone = false, node_rank_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") return false;
    if (arg.empty() || arg[0] != '-') break;  // the program
    auto [name, value] = split_option(arg);
    if (name == "--standalone" || name == "--no-python") {  // flags; emberrun never starts Python
      if (value) throw std::invalid_argument(name + " takes no value");
      standalone = standalone || name == "--standalone";
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
      value = argv[++i];
    }
    const std::string& v = *value;
    if (name == "--nproc-per-node") {
      o.nproc_per_node = to_nproc_per_node(v);
    } else if (name == "--nnodes") {
      o.nnodes = to_nnodes(v);
    } else if (name == "--node-rank") {
      o.node_rank = to_int(name, v, 0);
      node_rank_given = true;
    } else if (name == "--master-addr") {
      o.master_addr = v;
    } else if (name == "--master-port") {
      o.master_port = to_int(name, v, 0);
    } else if (name == "--rdzv-endpoint") {
      endpoint = to_endpoint(v);
    } else if (name == "--rdzv-backend") {
      if (v != "c10d" && v != "static")
        throw std::invalid_argument("--rdzv-backend " + v + ": emberrun has c10d and static only");
      backend = v;
    } else if (name == "--rdzv-id") {
      o.rdzv_id = v;
    } else if (name == "--max-restarts") {
      o.max_restarts = to_int(name, v, 0);
    } else if (name == "--log-dir") {
      o.log_dir = v;
    } else if (name == "--redirects") {
      o.redirects = to_std_streams(name, v);
    } else if (name == "--tee") {
      o.tee = to_std_streams(name, v);
    } else if (name == "--local-ranks-filter") {
      o.local_ranks_filter = to_local_ranks(v);
    } else if (name == "--monitor-interval") {
      o.monitor_interval = to_seconds(name, v);
    } else if (name == "--grace-period") {
      o.grace_period = to_seconds(name, v);
    } else if (name == "--rdzv-timeout") {
      o.rdzv_timeout = to_seconds(name, v);
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  for (; i < argc; ++i) o.program.push_back(argv[i]);
  if (o.program.empty()) throw std::invalid_argument("no program to run");
  if (standalone) {
    if (o.nnodes > 1)
      throw std::invalid_argument("--standalone runs one node, got --nnodes " + std::to_string(o.nnodes));
    endpoint = {"127.0.0.1", 0};
  }
  if (endpoint) std::tie(o.master_addr, o.master_port) = *endpoint;
  if (backend == "c10d" && o.nnodes > 1 && !node_rank_given)
    throw std::invalid_argument("--rdzv-backend c10d with --nnodes " + std::to_string(o.nnodes) +
                                " needs --node-rank on each node: emberrun does not hand out node ranks");
  if (o.node_rank >= o.nnodes)
    throw std::invalid_argument("--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
                                std::to_string(o.nnodes));
  if (o.master_port > 65535)
    throw std::invalid_argument("--master-port " + std::to_string(o.master_port) + " is above 65535");
  if (o.master_port == 0 && o.nnodes > 1)
    throw std::invalid_argument(
        "--master-port 0 (a free port) works with one node only: the other nodes must know it");
  return true;
}

}  // namespace emberrun
