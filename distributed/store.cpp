#include "ember/distributed/store.h"

#include "ember/core/error.h"

namespace ember::distributed {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultTimeout),
      prefix_(std::move(prefix)),
      store_(std::move(store)) {
  EMBER_CHECK(store_, "PrefixStore: the underlying store is null (prefix '", prefix_, "')");
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) { store_->set(join(key), value); }
std::string PrefixStore::get(const std::string& key) { return store_->get(join(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t value) { return store_->add(join(key), value); }
std::string PrefixStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  return store_->compare_set(join(key), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return store_->check(join(keys)); }
bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(join(key)); }
int64_t PrefixStore::num_keys() { return store_->num_keys(); }
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(join(keys), timeout);
}

}  // namespace ember::distributed
