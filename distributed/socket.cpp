#include "ember/distributed/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "ember/core/error.h"

namespace ember::distributed::detail {
namespace {

std::string errno_str(int err) { return std::strerror(err); }

void set_common_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "(unknown peer)";
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "(unknown peer)";
  return std::string(host) + ":" + port;
}

// One attempt over every address of host:port; the connected fd or -1 with `err` set.
int try_connect(const std::string& host, int port, int& err, std::string& gai_error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    gai_error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket Socket::listen(int port, const char* what, bool loopback_only) {
  EMBER_CHECK(port >= 0 && port < 65536, what, ": port ", port, " is out of range [0, 65535]");
  // A dual-stack IPv6 socket accepts IPv4 clients too; hosts without IPv6 get an IPv4 one.
  Socket s(loopback_only ? -1 : ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1, zero = 0;
  if (s.valid()) {
    setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(s.fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(s.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      int err = errno;
      EMBER_CHECK(err != EADDRINUSE, what, ": port ", port, " is in use");
      s = Socket();
    }
  }
  if (!s.valid()) {
    s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EMBER_CHECK(s.valid(), what, ": socket() failed: ", errno_str(errno));
    setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(s.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      const int err = errno;
      EMBER_CHECK(err != EADDRINUSE, what, ": port ", port, " is in use");
      throw Error(ember::detail::str_cat(what, ": cannot bind port ", port, ": ", errno_str(err)));
    }
  }
  EMBER_CHECK(::listen(s.fd_, 1024) == 0, what, ": listen on port ", port, " failed: ", errno_str(errno));
  return s;
}

Socket Socket::connect(const std::string& host, int port, Clock::time_point deadline, const char* what) {
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int err = 0;
  std::string gai_error;
  for (;;) {
    int fd = try_connect(host, port, err, gai_error);
    if (fd >= 0) {
      set_common_options(fd);
      return Socket(fd);
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  throw Error(ember::detail::str_cat(what, ": could not connect to ", host, ":", port, " within ", waited,
                                     " ms (last error: ", gai_error.empty() ? errno_str(err) : gai_error,
                                     ")"));
}

int Socket::local_port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Socket Socket::accept() const {
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  set_common_options(fd);
  return Socket(fd);
}

void Socket::set_nonblocking() const { fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK); }

void Socket::send_all(const void* data, size_t n) const {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {  // a non-blocking socket with a full send buffer
      pollfd pfd{fd_, POLLOUT, 0};
      EMBER_CHECK(::poll(&pfd, 1, 30'000) != 0, "send to ", peer_name(fd_), " stalled for 30 s");
      continue;
    }
    EMBER_CHECK(w > 0, "send to ", peer_name(fd_), " failed: ", errno_str(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

bool Socket::recv_all(void* data, size_t n, Clock::time_point deadline) const {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, poll_timeout_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return false;
    ssize_t r = ::recv(fd_, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    EMBER_CHECK(r != 0, "connection closed by ", peer_name(fd_));
    EMBER_CHECK(r > 0, "receive from ", peer_name(fd_), " failed: ", errno_str(errno));
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int poll_timeout_ms(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0 || timeout > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + timeout;
}

}  // namespace ember::distributed::detail
