#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/error.h"

namespace ember {

// Keys in insertion order with O(1) lookup: what named_parameters() and state_dict() return
// (PyTorch's OrderedDict). Iteration yields std::pair<std::string, V>.
template <class V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;

  // Adds a new key; a key that exists already is an error (`what` names the caller).
  V& insert(std::string key, V value, const char* what = "OrderedDict") {
    EMBER_CHECK(!index_.count(key), what, ": key \"", key, "\" already exists");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  // Adds or replaces.
  V& set(const std::string& key, V value) {
    if (V* v = find(key)) return *v = std::move(value);
    return insert(key, std::move(value));
  }

  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const V* find(const std::string& key) const { return const_cast<OrderedDict*>(this)->find(key); }
  bool contains(const std::string& key) const { return index_.count(key) > 0; }
  const V& at(const std::string& key) const {
    const V* v = find(key);
    EMBER_CHECK(v, "OrderedDict: no key \"", key, "\"");
    return *v;
  }
  V& at(const std::string& key) { return const_cast<V&>(std::as_const(*this).at(key)); }
  const V& operator[](const std::string& key) const { return at(key); }
  V& operator[](const std::string& key) { return at(key); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }

  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const Item& it : items_) k.push_back(it.first);
    return k;
  }
  std::vector<V> values() const {
    std::vector<V> v;
    for (const Item& it : items_) v.push_back(it.second);
    return v;
  }
  const std::vector<Item>& items() const { return items_; }

  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace ember
