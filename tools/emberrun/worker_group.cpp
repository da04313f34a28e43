#include "worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace emberrun {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our own output is gone: nothing better to do
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, int out_fd, int err_fd,
                             pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // emberrun died before the line above
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(path, argv, envp);
  const char msg[] = "emberrun: exec failed\n";
  write_all(2, msg, sizeof(msg) - 1);
  _exit(127);
}

int status_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) != 0)
      throw std::runtime_error("cannot execute '" + name + "': " + std::strerror(errno));
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  throw std::runtime_error("program '" + name + "' not found on PATH");
}

WorkerGroup::WorkerGroup(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<WorkerSpec>& specs, const std::string& log_dir,
                         bool truncate_logs) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t self = getpid();
  for (const auto& spec : specs) {
    std::vector<char*> envp;
    for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    Worker w;
    w.global_rank = spec.global_rank;
    if (!log_dir.empty()) {
      std::string file = log_dir + "/rank_" + std::to_string(spec.global_rank) + ".log";
      w.log_fd =
          open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate_logs ? O_TRUNC : 0), 0644);
      if (w.log_fd < 0) throw std::runtime_error("cannot open " + file + ": " + std::strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) exec_child(path.c_str(), args.data(), envp.data(), out[1], err[1], self);
    setpgid(pid, pid);  // also here, so that the group exists before we might signal it
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    w.pid = pid;
    w.out = {out[0], spec.console_streams & 1 ? 1 : -1, {}};
    w.err = {err[0], spec.console_streams & 2 ? 2 : -1, {}};
    workers_.push_back(std::move(w));
  }
}

WorkerGroup::~WorkerGroup() {
  kill_groups(SIGKILL);
  reap(true);
  for (auto& w : workers_) {
    for (Stream* s : {&w.out, &w.err})
      if (s->fd >= 0) close(s->fd);
    if (w.log_fd >= 0) close(w.log_fd);
  }
}

void WorkerGroup::emit(Worker& w, Stream& s, const std::string& line) {
  if (s.dest >= 0) {
    std::string out = "[rank " + std::to_string(w.global_rank) + "]: " + line + "\n";
    write_all(s.dest, out.data(), out.size());
  }
  if (w.log_fd >= 0) {
    std::string raw = line + "\n";
    write_all(w.log_fd, raw.data(), raw.size());
  }
}

// Reads what the stream has, writes out its complete lines; at EOF the last partial line too.
void WorkerGroup::pump(Worker& w, Stream& s) {
  char buf[65536];
  for (;;) {
    ssize_t r = read(s.fd, buf, sizeof(buf));
    if (r > 0) {
      s.partial.append(buf, static_cast<size_t>(r));
      size_t start = 0, nl;
      while ((nl = s.partial.find('\n', start)) != std::string::npos) {
        emit(w, s, s.partial.substr(start, nl - start));
        start = nl + 1;
      }
      s.partial.erase(0, start);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    if (!s.partial.empty()) emit(w, s, s.partial);  // EOF (or an error): the stream is done
    s.partial.clear();
    close(s.fd);
    s.fd = -1;
    return;
  }
}

std::vector<WorkerExit> WorkerGroup::reap(bool block) {
  std::vector<WorkerExit> exits;
  for (auto& w : workers_) {
    if (!w.running) continue;
    int status = 0;
    pid_t r;
    do {
      r = waitpid(w.pid, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == w.pid || (r < 0 && errno == ECHILD)) {
      w.running = false;
      exits.push_back({w.global_rank, w.pid, r == w.pid ? status_code(status) : 1});
    }
  }
  return exits;
}

std::vector<WorkerExit> WorkerGroup::poll(std::chrono::milliseconds timeout,
                                          const std::vector<int>& wake_fds) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, Stream*>> owners;
  for (auto& w : workers_) {
    for (Stream* s : {&w.out, &w.err}) {
      if (s->fd < 0) continue;
      fds.push_back({s->fd, POLLIN, 0});
      owners.emplace_back(&w, s);
    }
  }
  for (int fd : wake_fds) fds.push_back({fd, POLLIN, 0});
  int rc = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (rc > 0) {
    for (size_t i = 0; i < owners.size(); ++i)
      if (fds[i].revents) pump(*owners[i].first, *owners[i].second);
  }
  return reap(false);
}

bool WorkerGroup::all_exited() const {
  for (const auto& w : workers_)
    if (w.running) return false;
  return true;
}

void WorkerGroup::kill_groups(int sig) {
  // The whole group: a worker that exited may have left children of its own in it.
  for (const auto& w : workers_) kill(-w.pid, sig);
}

void WorkerGroup::stop(int sig, std::chrono::milliseconds grace) {
  for (const auto& w : workers_)
    if (w.running) kill(-w.pid, sig);
  auto deadline = Clock::now() + grace;
  while (!all_exited() && Clock::now() < deadline) poll(std::chrono::milliseconds(20));
  kill_groups(SIGKILL);
  reap(true);
  // Flush what the pipes still hold (they close once nothing of the groups is left).
  auto flush_deadline = Clock::now() + std::chrono::milliseconds(500);
  for (;;) {
    bool open = false;
    for (auto& w : workers_) open = open || w.out.fd >= 0 || w.err.fd >= 0;
    if (!open || Clock::now() >= flush_deadline) break;
    poll(std::chrono::milliseconds(20));
  }
}

}  // namespace emberrun
