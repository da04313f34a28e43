#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "ember/distributed/socket.h"
#include "ember/distributed/store.h"

namespace ember::distributed {

// A Store over TCP (c10d::TCPStore). The master process runs the server (a thread polling the
// client sockets) and is a client too; every other process connects to host:port, retrying
// while the server comes up. Port 0 on the master picks a free port (port() says which).
// With world_size given, each store counts itself in; the master then waits (unless
// wait_for_workers is false) until world_size stores have joined.
//
// Security: a store whose host is 127.0.0.1 or localhost listens on loopback alone; otherwise on
// every interface (other nodes must reach it). With EMBER_STORE_TOKEN in the environment (emberrun
// makes one for every single-node job), every connection must first present that token, compared
// in constant time, or the server hangs up. Requests over 64 MiB are refused unread.
//
// Each call takes a connection of its own from a pool, so one store serves many threads and a
// blocking get in one thread does not hold up a set in another. A server that dies makes the
// next call fail with an error naming it (an open connection sees the close at once).
class TCPStore : public Store {
 public:
  TCPStore(std::string host, int port, std::optional<int> world_size = std::nullopt, bool is_master = false,
           std::chrono::milliseconds timeout = kDefaultTimeout, bool wait_for_workers = true);
  ~TCPStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  // Keys the users set (the store's own bookkeeping keys are not counted).
  int64_t num_keys() override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  bool is_master() const { return server_ != nullptr; }

  class Server;

 private:
  // Sends one request and returns the reply's payload; `op` and `key` name it in errors.
  std::string request(const std::string& payload, detail::Clock::time_point reply_deadline, const char* op,
                      const std::string& key);
  detail::Socket take_connection(const char* op);
  // A new connection, authenticated with the token when there is one.
  detail::Socket connect(detail::Clock::time_point deadline);
  std::string server_name() const;

  std::string host_;
  int port_;
  std::string token_;  // EMBER_STORE_TOKEN
  std::unique_ptr<Server> server_;
  std::mutex pool_mu_;
  std::vector<detail::Socket> idle_;
};

}  // namespace ember::distributed
