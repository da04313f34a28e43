#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::distributed {

// A key-value store every rank reaches (c10d::Store): process groups rendezvous through it.
// Values are byte strings. Blocking calls (get, wait) give up after the store's timeout and
// throw ember::Error naming the key; a timeout of kNoTimeout waits forever.
class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300'000};
  static constexpr std::chrono::milliseconds kNoTimeout{0};

  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists, then returns its value.
  virtual std::string get(const std::string& key) = 0;
  // Adds `value` to the integer stored at `key` (0 when absent) atomically; returns the sum.
  virtual int64_t add(const std::string& key, int64_t value) = 0;
  // Sets `key` to `desired` if its value is `expected` (or it is absent and `expected` is
  // empty); returns the value it holds afterwards.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // True when every key exists (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // True when the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 protected:
  std::chrono::milliseconds timeout_;
};

// Puts "<prefix>/" in front of every key of another store (c10d::PrefixStore): each process
// group keeps its rendezvous keys apart. num_keys counts the underlying store's keys.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  const std::shared_ptr<Store>& underlying_store() const { return store_; }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace ember::distributed
