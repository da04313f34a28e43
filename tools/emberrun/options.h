#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace emberrun {

// torchrun's --redirects / --tee value: a worker's streams as bits (1 stdout, 2 stderr), one
// value for every local rank ("3") or one per local rank ("0:1,1:2"; the ranks left out 0).
struct StdStreams {
  int all = 0;
  std::map<int, int> by_local_rank;
  int of(int local_rank) const;
  bool any() const;
};

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
  std::string log_dir;               // empty: no log files (unless --redirects or --tee)
  double monitor_interval = 0.1;     // seconds
  double grace_period = 5;           // seconds between SIGTERM and SIGKILL
  double rdzv_timeout = 300;         // seconds to wait for the other nodes
  std::string rdzv_id = "none";      // only exported to the workers, as TORCHELASTIC_RUN_ID
  StdStreams redirects;              // to the log file, not the console
  StdStreams tee;                    // to the log file and the console
  std::set<int> local_ranks_filter;  // the local ranks whose output the console shows; empty: all
  std::vector<std::string> program;  // program and its arguments

  // The streams of local rank `local_rank` that the console shows (bit 1 stdout, bit 2 stderr).
  int console_streams(int local_rank) const;
  // --redirects and --tee need log files: in a temporary directory when there is no --log-dir.
  bool wants_log_files() const { return redirects.any() || tee.any(); }
};

extern const char* const kUsage;

// Parses emberrun's command line; throws std::invalid_argument naming the bad option. Returns
// false for --help.
bool parse_options(int argc, char** argv, Options& out);

}  // namespace emberrun
