#include "dist_test_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

extern char** environ;

namespace ember::testing::dist {
namespace {

std::map<std::string, WorkerFn>& workers() {
  static std::map<std::string, WorkerFn> w;
  return w;
}

int status_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

WorkerRegistrar::WorkerRegistrar(const char* name, WorkerFn fn) { workers()[name] = std::move(fn); }

int run_worker(const std::string& name) {
  auto it = workers().find(name);
  if (it == workers().end()) return -1;
  // A worker outlives no test: it dies with the process that started it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  try {
    it->second();
  } catch (const std::exception& e) {
    std::cerr << "worker " << name << " failed: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

int env_int(const char* name) {
  const char* v = std::getenv(name);
  EMBER_CHECK(v && *v, "worker: ", name, " is not set");
  return std::atoi(v);
}

void check_close(const Tensor& actual, const Tensor& expected, const std::string& what,
                 std::optional<Tolerance> tol) {
  auto r = assert_close(actual, expected, tol);
  EMBER_CHECK(r, what, " (rank ", std::getenv("RANK") ? std::getenv("RANK") : "?", "): ", r.message());
}

Process::Process(const std::vector<std::string>& argv, const Env& env, std::string log)
    : log_(std::move(log)) {
  Env merged;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strs;
  for (const auto& [k, v] : merged) env_strs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = posix_spawn(&pid_, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  EMBER_CHECK(rc == 0, "Process: cannot start ", argv[0], ": ", std::strerror(rc));
}

Process::Process(Process&& o) noexcept : pid_(o.pid_), log_(std::move(o.log_)), reaped_(o.reaped_) {
  o.pid_ = -1;
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int Process::wait(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status_code(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  reaped_ = true;
  return -1;
}

std::string Process::output() const { return read_file(log_); }

void Process::signal(int sig) const { kill(pid_, sig); }

void run_workers(const std::string& name, int world_size, const Env& extra, milliseconds timeout) {
  TempDir dir;
  distributed::TCPStore store("127.0.0.1", 0, std::nullopt, true, milliseconds(30'000));
  std::vector<Process> procs;
  for (int r = 0; r < world_size; ++r) {
    Env env = {{"RANK", std::to_string(r)},
               {"LOCAL_RANK", std::to_string(r)},
               {"WORLD_SIZE", std::to_string(world_size)},
               {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", std::to_string(store.port())},
               {"EMBER_USE_AGENT_STORE", "1"},
               {"OMP_NUM_THREADS", "1"}};
    for (const auto& [k, v] : extra) env[k] = v;
    procs.emplace_back(std::vector<std::string>{self_exe(), "--worker", name}, env,
                       dir.file("rank_" + std::to_string(r) + ".log"));
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < world_size; ++r) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    int code = procs[r].wait(std::max(left, milliseconds(1)));
    EXPECT_EQ(code, 0) << "worker " << name << " rank " << r << " of " << world_size
                       << (code == -1 ? " timed out" : " failed") << "; its output:\n"
                       << procs[r].output();
  }
}

std::shared_ptr<distributed::ProcessGroup> group_of_one() {
  auto store =
      std::make_shared<distributed::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  return distributed::make_process_group_gloo(std::make_shared<distributed::PrefixStore>("g", store), 0, 1);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie (dead, not yet reaped by whoever inherited it) is not running.
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace ember::testing::dist
