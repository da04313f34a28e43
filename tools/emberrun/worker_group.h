#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace emberrun {

// One worker to start: its global rank, its whole environment ("KEY=VALUE") and the streams
// of it the console shows (bit 1 stdout, bit 2 stderr; the log file gets both).
struct WorkerSpec {
  int global_rank;
  std::vector<std::string> env;
  int console_streams;
};

struct WorkerExit {
  int global_rank;
  pid_t pid;
  int code;  // the exit code, or 128 + the signal that ended it
};

// The copies of the program on this node. Each runs in its own process group (so a signal
// reaches whatever it starts too) and dies with emberrun (PR_SET_PDEATHSIG). Their stdout and
// stderr come through pipes; every line goes out prefixed with "[rank N]: " (unless the spec
// keeps that stream off the console) and, with a log directory, into DIR/rank_N.log.
class WorkerGroup {
 public:
  // `path` is the resolved program, argv[0] the name it was given.
  WorkerGroup(const std::string& path, const std::vector<std::string>& argv,
              const std::vector<WorkerSpec>& specs, const std::string& log_dir, bool truncate_logs);
  ~WorkerGroup();  // kills and reaps whatever still runs
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Forwards output for up to `timeout` (returning early when one of `wake_fds` becomes
  // readable) and returns the workers that exited since the last call.
  std::vector<WorkerExit> poll(std::chrono::milliseconds timeout, const std::vector<int>& wake_fds = {});
  bool all_exited() const;
  // Sends `sig` to every running worker's process group, SIGKILL after `grace`; returns when
  // all have been reaped and their output is flushed.
  void stop(int sig, std::chrono::milliseconds grace);

 private:
  struct Stream {
    int fd = -1;
    int dest = 1;  // our stdout or stderr; -1: the log file only
    std::string partial;
  };
  struct Worker {
    pid_t pid = -1;
    int global_rank = 0;
    bool running = true;
    Stream out, err;
    int log_fd = -1;
  };

  void pump(Worker& w, Stream& s);
  void emit(Worker& w, Stream& s, const std::string& line);
  std::vector<WorkerExit> reap(bool block);
  void kill_groups(int sig);

  std::vector<Worker> workers_;
};

// The program's path: `name` itself when it has a '/', else the first match on PATH; throws
// std::runtime_error when there is none.
std::string resolve_program(const std::string& name);

}  // namespace emberrun
