#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ember::distributed::detail {

using Clock = std::chrono::steady_clock;

// A TCP socket that closes its descriptor when destroyed (TCPStore and emberrun's plumbing).
// Errors throw ember::Error starting with `what` (the caller's name) and naming the peer.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Listens on `port` (0: a free one the kernel picks) of every interface, IPv6 and IPv4, or
  // with loopback_only on 127.0.0.1 alone (a single-node job: nothing outside the machine reaches it).
  static Socket listen(int port, const char* what, bool loopback_only = false);
  // Connects to host:port, retrying with backoff (the server may still be starting) until
  // `deadline`.
  static Socket connect(const std::string& host, int port, Clock::time_point deadline, const char* what);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int local_port() const;
  // The accepted connection, or an invalid socket when none is pending (non-blocking listener).
  Socket accept() const;
  void set_nonblocking() const;

  void send_all(const void* data, size_t n) const;
  // Reads exactly n bytes. Returns false when `deadline` passes first; throws on EOF or error.
  bool recv_all(void* data, size_t n, Clock::time_point deadline) const;

 private:
  int fd_ = -1;
};

// Milliseconds from now until `deadline` for poll(): 0 when past, -1 for Clock::time_point::max().
int poll_timeout_ms(Clock::time_point deadline);

// `now + timeout`, saturating (a zero timeout means "no deadline" for callers that say so).
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

}  // namespace ember::distributed::detail
