#pragma once

// The dist suite is one binary that is also the worker program its tests start: run as
// `ember_dist_tests --worker NAME` it runs the registered worker NAME and exits 0, or prints
// the error and exits 1. Tests start workers directly (run_workers) or through emberrun.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

#include <ember/distributed/distributed.h>

namespace ember::testing::dist {

using std::chrono::milliseconds;
using Env = std::map<std::string, std::string>;

// --- Workers ---
using WorkerFn = std::function<void()>;  // throws (ember::Error) on failure
struct WorkerRegistrar {
  WorkerRegistrar(const char* name, WorkerFn fn);
};
// The exit code of worker `name`, or -1 when there is none by that name.
int run_worker(const std::string& name);
std::string self_exe();

int env_int(const char* name);  // throws when unset
// Throws (failing the worker) with assert_close's message unless a and b match.
void check_close(const Tensor& actual, const Tensor& expected, const std::string& what,
                 std::optional<Tolerance> tol = std::nullopt);

// --- Processes the tests start ---
// A started process: its own process group, stdout and stderr into `log`. The destructor kills
// its group and reaps it if still running, so a failing test leaves nothing behind.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const Env& env, std::string log);
  ~Process();
  Process(Process&& o) noexcept;
  Process(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Exit code (128 + signal for a signal), or -1 after `timeout` (the process is then killed).
  int wait(milliseconds timeout);
  std::string output() const;
  void signal(int sig) const;

 private:
  pid_t pid_ = -1;
  std::string log_;
  bool reaped_ = false;
};

// Runs worker `name` as world_size processes that rendezvous through a TCPStore this test
// hosts (EMBER_USE_AGENT_STORE, as under emberrun); expects every one to exit 0 within
// `timeout` and prints the output of those that did not.
void run_workers(const std::string& name, int world_size, const Env& extra = {},
                 milliseconds timeout = milliseconds(30'000));

// A Gloo group of this process alone (over a TCPStore of its own), for one-process tests of the
// parallel layers and optimizers.
std::shared_ptr<distributed::ProcessGroup> group_of_one();

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
bool process_alive(pid_t pid);  // running (not a zombie)
int free_port();

}  // namespace ember::testing::dist

#define EMBER_DIST_CONCAT_(a, b) a##b
#define EMBER_DIST_CONCAT(a, b) EMBER_DIST_CONCAT_(a, b)
// DIST_WORKER(name) { body }: a worker program the tests start with `--worker name`.
#define DIST_WORKER(name)                                                                   \
  static void EMBER_DIST_CONCAT(dist_worker_, name)();                                      \
  static ::ember::testing::dist::WorkerRegistrar EMBER_DIST_CONCAT(dist_worker_reg_, name)( \
      #name, &EMBER_DIST_CONCAT(dist_worker_, name));                                       \
  static void EMBER_DIST_CONCAT(dist_worker_, name)()
