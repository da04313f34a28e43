#include "options.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

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
  EMBER_USE_AGENT_STORE=1   init_process_group connects to emberrun's store instead of
                    starting one on rank 0
  NCCL_NVLS_ENABLE=0, OMP_NUM_THREADS=1 (with more than one process per node)  unless set
ember's distributed::init_process_group reads them.

The node with --node-rank 0 hosts the job's TCPStore at --master-addr:--master-port; the
emberrun of every node registers there and waits for --nnodes of them (the rendezvous),
which gives each node its first global rank. Each copy runs in its own process group with
its output piped through emberrun: every line is prefixed with "[rank N]: " (stdout to
stdout, stderr to stderr) and, with --log-dir, also written to DIR/rank_N.log.

When a copy fails (non-zero exit or a signal) on any node, every emberrun sends SIGTERM to
its copies, then SIGKILL after the grace period, and then either restarts the whole job
(all nodes together, RESTART_COUNT + 1) while restarts remain, or exits with the failed
copy's exit code (128 + N when signal N ended it). SIGINT and SIGTERM sent to emberrun are
forwarded to the copies, which are then stopped the same way; emberrun then exits with
128 + the signal. The copies die with emberrun even if it is killed (PR_SET_PDEATHSIG).
emberrun exits 0 once the copies of every node have exited 0.

options:
  --nproc-per-node N      processes to start on this node (default 1)
  --nnodes M              nodes in the job (default 1)
  --node-rank R           this node's rank, 0 .. M-1 (default 0)
  --master-addr A         address of node 0, where the store runs (default 127.0.0.1)
  --master-port P         port of the store (default 29500; 0 picks a free port, one node only)
  --max-restarts K        restarts of the whole job after a failure (default 0)
  --log-dir D             also write each rank's output to D/rank_N.log (D is created)
  --monitor-interval S    seconds between checks of the copies and the other nodes (default 0.1)
  --grace-period S        seconds between SIGTERM and SIGKILL when stopping copies (default 5)
  --rdzv-timeout S        seconds to wait for the other nodes at each rendezvous (default 300)
  -h, --help              this text
Options also take the form --name=value, and torchrun's underscores (--nproc_per_node).
Everything after the program (or after --) goes to the program unchanged.

examples:
  emberrun --nproc-per-node 4 ./train --epochs 10
  # two nodes, run on each with its own --node-rank:
  emberrun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 \
           --nproc-per-node 8 ./train
)";

namespace {

int to_int(const std::string& name, const std::string& v, int min) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < min || n > (1 << 30))
    throw std::invalid_argument(name + " needs an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return static_cast<int>(n);
}

double to_seconds(const std::string& name, const std::string& v) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(s > 0))
    throw std::invalid_argument(name + " needs a positive number of seconds, got '" + v + "'");
  return s;
}

}  // namespace

bool parse_options(int argc, char** argv, Options& o) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") return false;
    if (arg.rfind("--", 0) != 0) break;  // the program
    std::string name = arg, value;
    bool inline_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    for (char& c : name)
      if (c == '_') c = '-';
    if (!inline_value) {
      if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
      value = argv[++i];
    }
    if (name == "--nproc-per-node") {
      o.nproc_per_node = to_int(name, value, 1);
    } else if (name == "--nnodes") {
      o.nnodes = to_int(name, value, 1);
    } else if (name == "--node-rank") {
      o.node_rank = to_int(name, value, 0);
    } else if (name == "--master-addr") {
      o.master_addr = value;
    } else if (name == "--master-port") {
      o.master_port = to_int(name, value, 0);
    } else if (name == "--max-restarts") {
      o.max_restarts = to_int(name, value, 0);
    } else if (name == "--log-dir") {
      o.log_dir = value;
    } else if (name == "--monitor-interval") {
      o.monitor_interval = to_seconds(name, value);
    } else if (name == "--grace-period") {
      o.grace_period = to_seconds(name, value);
    } else if (name == "--rdzv-timeout") {
      o.rdzv_timeout = to_seconds(name, value);
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  for (; i < argc; ++i) o.program.push_back(argv[i]);
  if (o.program.empty()) throw std::invalid_argument("no program to run");
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
