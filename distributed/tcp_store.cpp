#include "ember/distributed/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "ember/core/error.h"

namespace ember::distributed {

using detail::Clock;
using detail::Socket;
using std::chrono::milliseconds;

namespace {

// Wire format: every message is a frame, a u32 byte count then the payload. A request's
// payload is a command byte and its fields, a reply's a status byte and its fields; integers
// are little-endian, strings a u32 length and the bytes.
// With a token (EMBER_STORE_TOKEN), a connection's first request must be kAuth with it; any
// other first request, or another token, and the server hangs up.
enum class Cmd : uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kCheck, kDelete, kNumKeys, kWait, kAuth };
enum class Status : uint8_t { kOk = 0, kTimeout, kError };
// A request or reply longer than this is refused before it is buffered: a hostile or broken client
// cannot make the server allocate without bound.
constexpr uint32_t kMaxFrame = 64u << 20;

// The job's secret, shared by its processes through the environment ("" when there is none).
std::string store_token() {
  const char* t = std::getenv("EMBER_STORE_TOKEN");
  return t ? t : "";
}

// Compares in time independent of where the strings differ.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^
            static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost"; }

// The store's own keys (who has joined) live under a prefix no user key has.
const std::string kInternalPrefix = "\x01ember_store/";
const std::string kJoinedKey = kInternalPrefix + "joined";
const std::string kReadyKey = kInternalPrefix + "ready";

// How long a get or wait reply may lag behind the server's own deadline.
constexpr milliseconds kReplySlack{2000};
// New connections after the first (more threads, or after an error) retry this long at most.
constexpr milliseconds kReconnectTimeout{1000};

class Writer {
 public:
  Writer() : buf_(4, '\0') {}
  Writer& u8(uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Writer& i64(int64_t v) {
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    return *this;
  }
  Writer& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
    return *this;
  }
  Writer& cmd(Cmd c) { return u8(static_cast<uint8_t>(c)); }
  Writer& status(Status s) { return u8(static_cast<uint8_t>(s)); }
  // The frame: the payload with its length in front.
  const std::string& frame() {
    uint32_t n = static_cast<uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return buf_;
  }

 private:
  std::string buf_;
};

uint32_t decode_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  // It reads in place: a temporary string would be gone before the reading.
  explicit Reader(std::string&&) = delete;
  uint8_t u8() { return static_cast<uint8_t>(*take(1)); }
  uint32_t u32() { return decode_u32(take(4)); }
  int64_t i64() {
    const char* p = take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return static_cast<int64_t>(v);
  }
  std::string str() {
    uint32_t n = u32();
    return std::string(take(n), n);
  }
  std::vector<std::string> strs() {
    std::vector<std::string> out(u32());
    for (auto& s : out) s = str();
    return out;
  }

 private:
  const char* take(size_t n) {
    EMBER_CHECK(n <= d_.size(), "TCPStore: malformed message (", n, " bytes wanted, ", d_.size(), " left)");
    const char* p = d_.data();
    d_.remove_prefix(n);
    return p;
  }
  std::string_view d_;
};

Writer& put_strs(Writer& w, const std::vector<std::string>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) w.str(s);
  return w;
}

}  // namespace

// --- Server: one thread polls the listener, a wake-up pipe and every client. Requests are
// answered at once, except get and wait on missing keys: those park as waiters, answered
// when a set provides the keys or with kTimeout at their deadline. ---
class TCPStore::Server {
 public:
  Server(int port, bool loopback_only, std::string token)
      : listener_(Socket::listen(port, "TCPStore", loopback_only)), token_(std::move(token)) {
    listener_.set_nonblocking();
    EMBER_CHECK(pipe2(wake_, O_CLOEXEC) == 0, "TCPStore: pipe failed: ", std::strerror(errno));
    thread_ = std::thread([this] { loop(); });
  }
  ~Server() {
    char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  int port() const { return listener_.local_port(); }

 private:
  struct Client {
    Socket sock;
    std::string in;
    bool authenticated;
  };
  struct Waiter {
    int fd;
    std::vector<std::string> keys;
    Clock::time_point deadline;
    bool is_get;  // get replies with the value, wait with kOk
  };

  void loop() {
    std::vector<pollfd> fds;
    std::vector<int> ready;
    for (;;) {
      fds.assign({{wake_[0], POLLIN, 0}, {listener_.fd(), POLLIN, 0}});
      for (auto& [fd, c] : clients_) fds.push_back({fd, POLLIN, 0});
      Clock::time_point next = Clock::time_point::max();
      for (const auto& w : waiters_) next = std::min(next, w.deadline);
      int rc = ::poll(fds.data(), fds.size(), detail::poll_timeout_ms(next));
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        for (Socket s = listener_.accept(); s.valid(); s = listener_.accept()) {
          s.set_nonblocking();
          int fd = s.fd();
          clients_[fd] = Client{std::move(s), {}, token_.empty()};
        }
      }
      ready.clear();
      for (size_t i = 2; i < fds.size(); ++i)
        if (fds[i].revents) ready.push_back(fds[i].fd);
      for (int fd : ready) serve(fd);
      expire_waiters();
      for (int fd : dead_) drop(fd);
      dead_.clear();
    }
  }

  // Reads what the client sent and answers every complete request; drops it on EOF or error.
  void serve(int fd) {
    auto it = clients_.find(fd);
    if (it == clients_.end() || dead_.count(fd)) return;
    Client& c = it->second;
    char buf[65536];
    bool open = true;
    for (;;) {
      ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
      if (r > 0) {
        c.in.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      open = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      break;
    }
    try {
      size_t pos = 0;
      while (c.in.size() - pos >= 4) {
        uint32_t n = decode_u32(c.in.data() + pos);
        EMBER_CHECK(n <= kMaxFrame, "TCPStore: request of ", n, " bytes is too large");
        if (c.in.size() - pos - 4 < n) break;
        const std::string_view payload = std::string_view(c.in).substr(pos + 4, n);
        if (!c.authenticated) authenticate(c, payload);
        handle(fd, payload);
        pos += 4 + n;
      }
      c.in.erase(0, pos);
    } catch (const Error&) {
      open = false;  // a garbled request or a client that stopped reading: hang up on it
    }
    if (!open) dead_.insert(fd);
  }

  // The first request of a connection to a store with a token: kAuth with that token, or the
  // connection is dropped (the throw) before anything else is read.
  void authenticate(Client& c, std::string_view payload) {
    Reader r(payload);
    EMBER_CHECK(static_cast<Cmd>(r.u8()) == Cmd::kAuth, "TCPStore: a client sent a request before its token");
    EMBER_CHECK(same_secret(r.str(), token_), "TCPStore: a client sent the wrong token");
    c.authenticated = true;
  }

  void drop(int fd) {
    waiters_.remove_if([fd](const Waiter& w) { return w.fd == fd; });
    clients_.erase(fd);
  }

  // A client that cannot be written to is dropped after this round (not now: callers iterate).
  void send(int fd, Writer& w) {
    try {
      clients_.at(fd).sock.send_all(w.frame().data(), w.frame().size());
    } catch (const Error&) {
      dead_.insert(fd);
    }
  }

  void handle(int fd, std::string_view payload) {
    Reader r(payload);
    Writer w;
    switch (static_cast<Cmd>(r.u8())) {
      case Cmd::kSet: {
        std::string key = r.str();
        data_[key] = r.str();
        send(fd, w.status(Status::kOk));
        wake_waiters();
        return;
      }
      case Cmd::kGet:
      case Cmd::kWait: {
        bool is_get = static_cast<Cmd>(payload[0]) == Cmd::kGet;
        Waiter waiter{fd, is_get ? std::vector<std::string>{r.str()} : r.strs(), {}, is_get};
        waiter.deadline = detail::deadline_after(milliseconds(r.i64()));
        if (!try_answer(waiter)) waiters_.push_back(std::move(waiter));
        return;
      }
      case Cmd::kAdd: {
        std::string key = r.str();
        int64_t delta = r.i64(), old = 0;
        auto it = data_.find(key);
        if (it != data_.end()) {
          const std::string& v = it->second;
          auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), old);
          if (ec != std::errc() || end != v.data() + v.size()) {
            send(fd, w.status(Status::kError).str("key '" + key + "' holds '" + v + "', not an integer"));
            return;
          }
        }
        data_[key] = std::to_string(old + delta);
        send(fd, w.status(Status::kOk).i64(old + delta));
        wake_waiters();
        return;
      }
      case Cmd::kCompareSet: {
        std::string key = r.str(), expected = r.str(), desired = r.str();
        auto it = data_.find(key);
        bool swap = it == data_.end() ? expected.empty() : it->second == expected;
        if (swap) data_[key] = desired;
        std::string now = swap ? desired : (it == data_.end() ? expected : it->second);
        send(fd, w.status(Status::kOk).str(now));
        if (swap) wake_waiters();
        return;
      }
      case Cmd::kCheck: {
        auto keys = r.strs();
        bool all =
            std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data_.count(k); });
        send(fd, w.status(Status::kOk).u8(all));
        return;
      }
      case Cmd::kDelete:
        send(fd, w.status(Status::kOk).u8(data_.erase(r.str()) > 0));
        return;
      case Cmd::kAuth:  // checked by authenticate() when the store has a token
        send(fd, w.status(Status::kOk));
        return;
      case Cmd::kNumKeys: {
        int64_t n = std::count_if(data_.begin(), data_.end(),
                                  [](const auto& kv) { return !kv.first.starts_with(kInternalPrefix); });
        send(fd, w.status(Status::kOk).i64(n));
        return;
      }
    }
    throw Error(ember::detail::str_cat("TCPStore: unknown command ", int(payload[0])));
  }

  // Answers the waiter if all its keys exist.
  bool try_answer(const Waiter& waiter) {
    for (const auto& k : waiter.keys)
      if (!data_.count(k)) return false;
    Writer w;
    w.status(Status::kOk);
    if (waiter.is_get) w.str(data_.at(waiter.keys[0]));
    send(waiter.fd, w);
    return true;
  }

  void wake_waiters() {
    waiters_.remove_if([this](const Waiter& w) { return try_answer(w); });
  }

  void expire_waiters() {
    auto now = Clock::now();
    waiters_.remove_if([&](const Waiter& waiter) {
      if (waiter.deadline > now) return false;
      std::string missing;
      for (const auto& k : waiter.keys)
        if (!data_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
      Writer w;
      send(waiter.fd, w.status(Status::kTimeout).str(missing));
      return true;
    });
  }

  Socket listener_;
  const std::string token_;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::unordered_map<std::string, std::string> data_;
  std::map<int, Client> clients_;
  std::list<Waiter> waiters_;
  std::set<int> dead_;
};

// --- Client ---

TCPStore::TCPStore(std::string host, int port, std::optional<int> world_size, bool is_master,
                   milliseconds timeout, bool wait_for_workers)
    : Store(timeout), host_(std::move(host)), port_(port), token_(store_token()) {
  EMBER_CHECK(!world_size || *world_size >= 1, "TCPStore: world_size must be at least 1, got ", *world_size);
  if (is_master) {
    server_ = std::make_unique<Server>(port, is_loopback(host_), token_);
    port_ = server_->port();
  } else {
    EMBER_CHECK(port > 0 && port < 65536, "TCPStore: a client needs the server's port (1-65535), got ", port);
  }
  idle_.push_back(connect(detail::deadline_after(timeout)));
  if (!world_size) return;
  if (add(kJoinedKey, 1) == *world_size) set(kReadyKey, "1");
  if (is_master && wait_for_workers) {
    try {
      wait({kReadyKey}, timeout);
    } catch (const Error&) {
      throw Error(ember::detail::str_cat("TCPStore: only ", add(kJoinedKey, 0), " of ", *world_size,
                                         " processes joined within ", timeout.count(), " ms (server ",
                                         server_name(), ")"));
    }
  }
}

TCPStore::~TCPStore() {
  idle_.clear();
  server_.reset();
}

std::string TCPStore::server_name() const { return host_ + ":" + std::to_string(port_); }

Socket TCPStore::take_connection(const char* op) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      Socket s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  milliseconds t = timeout_.count() > 0 ? std::min(timeout_, kReconnectTimeout) : kReconnectTimeout;
  try {
    return connect(detail::deadline_after(t));
  } catch (const Error& e) {
    throw Error(ember::detail::str_cat("TCPStore: ", op, ": ", e.what() + std::strlen("TCPStore: ")));
  }
}

Socket TCPStore::connect(Clock::time_point deadline) {
  Socket s = Socket::connect(host_, port_, deadline, "TCPStore");
  if (token_.empty()) return s;
  const std::string frame =
      Writer().cmd(Cmd::kAuth).str(token_).frame();  // a copy: the Writer is a temporary
  char reply[5];
  bool ok = false;
  try {
    s.send_all(frame.data(), frame.size());
    ok = s.recv_all(reply, sizeof reply, deadline) && decode_u32(reply) == 1 &&
         static_cast<Status>(reply[4]) == Status::kOk;
  } catch (const Error&) {
    // The server hangs up on a wrong token.
  }
  EMBER_CHECK(ok, "TCPStore: server ", server_name(),
              " refused this process's EMBER_STORE_TOKEN (another job's store, or a token that differs)");
  return s;
}

std::string TCPStore::request(const std::string& payload_frame, Clock::time_point reply_deadline,
                              const char* op, const std::string& key) {
  std::string what = key.empty() ? std::string(op) : ember::detail::str_cat(op, " of key '", key, "'");
  Socket conn = take_connection(op);
  std::string reply;
  try {
    conn.send_all(payload_frame.data(), payload_frame.size());
    char header[4];
    bool ok = conn.recv_all(header, 4, reply_deadline);
    if (ok) {
      uint32_t n = decode_u32(header);
      EMBER_CHECK(n >= 1 && n <= kMaxFrame, "reply of ", n, " bytes is malformed");
      reply.resize(n);
      ok = conn.recv_all(reply.data(), n, reply_deadline);
    }
    EMBER_CHECK(ok, "no reply");
  } catch (const Error& e) {
    throw Error(ember::detail::str_cat("TCPStore: ", what, " failed: server ", server_name(),
                                       " is gone or not answering (", e.what(), ")"));
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.push_back(std::move(conn));
  }
  if (static_cast<Status>(reply[0]) == Status::kError) {
    Reader r(reply);
    r.u8();
    throw Error(ember::detail::str_cat("TCPStore: ", op, ": ", r.str()));
  }
  return reply;
}

namespace {

Clock::time_point reply_deadline(milliseconds timeout) {
  auto d = detail::deadline_after(timeout);
  return d == Clock::time_point::max() ? d : d + kReplySlack;
}

}  // namespace

void TCPStore::set(const std::string& key, const std::string& value) {
  request(Writer().cmd(Cmd::kSet).str(key).str(value).frame(), reply_deadline(timeout_), "set", key);
}

std::string TCPStore::get(const std::string& key) {
  std::string reply = request(Writer().cmd(Cmd::kGet).str(key).i64(timeout_.count()).frame(),
                              reply_deadline(timeout_), "get", key);
  EMBER_CHECK(static_cast<Status>(reply[0]) == Status::kOk, "TCPStore: get: wait for key '", key,
              "' timed out after ", timeout_.count(), " ms (server ", server_name(), ")");
  Reader r(reply);
  r.u8();
  return r.str();
}

int64_t TCPStore::add(const std::string& key, int64_t value) {
  const std::string reply =
      request(Writer().cmd(Cmd::kAdd).str(key).i64(value).frame(), reply_deadline(timeout_), "add", key);
  Reader r(reply);
  r.u8();
  return r.i64();
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  const std::string reply =
      request(Writer().cmd(Cmd::kCompareSet).str(key).str(expected).str(desired).frame(),
              reply_deadline(timeout_), "compare_set", key);
  Reader r(reply);
  r.u8();
  return r.str();
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  Writer w;
  const std::string reply =
      request(put_strs(w.cmd(Cmd::kCheck), keys).frame(), reply_deadline(timeout_), "check", "");
  Reader r(reply);
  r.u8();
  return r.u8() != 0;
}

bool TCPStore::delete_key(const std::string& key) {
  const std::string reply =
      request(Writer().cmd(Cmd::kDelete).str(key).frame(), reply_deadline(timeout_), "delete_key", key);
  Reader r(reply);
  r.u8();
  return r.u8() != 0;
}

int64_t TCPStore::num_keys() {
  const std::string reply =
      request(Writer().cmd(Cmd::kNumKeys).frame(), reply_deadline(timeout_), "num_keys", "");
  Reader r(reply);
  r.u8();
  return r.i64();
}

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  Writer w;
  std::string reply = request(put_strs(w.cmd(Cmd::kWait), keys).i64(timeout.count()).frame(),
                              reply_deadline(timeout), "wait", keys.size() == 1 ? keys[0] : "");
  if (static_cast<Status>(reply[0]) == Status::kOk) return;
  Reader r(reply);
  r.u8();
  std::string missing = r.str();
  throw Error(ember::detail::str_cat("TCPStore: wait for ", keys.size() == 1 ? "key " : "keys ", missing,
                                     " timed out after ", timeout.count(), " ms (server ", server_name(),
                                     ")"));
}

}  // namespace ember::distributed
