#pragma once

#include <string>
#include <vector>

namespace emberrun {

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
  std::string log_dir;               // empty: no log files
  double monitor_interval = 0.1;     // seconds
  double grace_period = 5;           // seconds between SIGTERM and SIGKILL
  double rdzv_timeout = 300;         // seconds to wait for the other nodes
  std::vector<std::string> program;  // program and its arguments
};

extern const char* const kUsage;

// Parses emberrun's command line; throws std::invalid_argument naming the bad option. Returns
// false for --help.
bool parse_options(int argc, char** argv, Options& out);

}  // namespace emberrun
