#pragma once

// Containers: Sequential (chains Tensor -> Tensor modules), ModuleList and ModuleDict. Modules
// go in as holders (`nn::Linear(4, 2)`) or shared_ptrs; their state_dict keys are "0.weight",
// "1.bias", ... (ModuleDict: "key.weight").

#include <concepts>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

// A module whose forward maps one tensor to one tensor (what Sequential chains).
template <class M>
concept TensorToTensorModule = std::derived_from<M, Module> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};

namespace detail {

// What Sequential and ModuleList share: modules by position, negative indices from the end.
class ModuleSequence : public Module {
 public:
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  // The module at `index` as an M (checked).
  template <class M>
  std::shared_ptr<M> ptr(int64_t index) const {
    std::shared_ptr<Module> m = (*this)[index];
    std::shared_ptr<M> p = std::dynamic_pointer_cast<M>(m);
    EMBER_CHECK(p, name(), ": module ", index, " is a ", m->name(), ", not the type asked for");
    return p;
  }
  template <class M>
  M& at(int64_t index) const {
    return *ptr<M>(index);
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 protected:
  explicit ModuleSequence(std::string name) : Module(std::move(name)) {}
  void append(std::string name, std::shared_ptr<Module> module);

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace detail

// Runs its modules in order, each one's output the next one's input; empty, it returns the
// input. `Sequential seq(Linear(4, 8), ReLU(), Linear(8, 2)); seq(x);`
class SequentialImpl : public detail::ModuleSequence {
 public:
  SequentialImpl() : ModuleSequence("Sequential") {}
  template <class First, class... Rest>
  explicit SequentialImpl(First&& first, Rest&&... rest) : SequentialImpl() {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }

  // Named after its position ("0", "1", ...), or `name`.
  template <class M>
  void push_back(std::shared_ptr<M> module) {
    push_back(std::to_string(size()), std::move(module));
  }
  template <class M>
  void push_back(std::string name, std::shared_ptr<M> module) {
    static_assert(TensorToTensorModule<M>,
                  "Sequential: a module in a Sequential needs Tensor forward(const Tensor&)");
    M* raw = module.get();
    append(std::move(name), std::move(module));  // keeps `raw` alive as long as this
    forwards_.emplace_back([raw](const Tensor& x) -> Tensor { return detail::call_module(*raw, x); });
  }
  template <AnyModuleHolder H>
  void push_back(const H& holder) {
    push_back(holder.ptr());
  }
  template <AnyModuleHolder H>
  void push_back(std::string name, const H& holder) {
    push_back(std::move(name), holder.ptr());
  }

  Tensor forward(const Tensor& input);
  // Runs only modules [begin, end) (checkpoint_sequential runs a Sequential in segments).
  Tensor forward_range(const Tensor& input, size_t begin, size_t end);

 private:
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};
EMBER_MODULE(Sequential);

// Holds modules by position (no forward of its own).
class ModuleListImpl : public detail::ModuleSequence {
 public:
  ModuleListImpl() : ModuleSequence("ModuleList") {}
  template <class First, class... Rest>
  explicit ModuleListImpl(First&& first, Rest&&... rest) : ModuleListImpl() {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }

  template <class M>
  requires std::derived_from<M, Module>
  void push_back(std::shared_ptr<M> module) { append(std::to_string(size()), std::move(module)); }
  template <AnyModuleHolder H>
  void push_back(const H& holder) {
    push_back(holder.ptr());
  }
};
EMBER_MODULE(ModuleList);

// Holds modules by key, in insertion order (no forward of its own).
class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);

  template <class M>
  requires std::derived_from<M, Module>
  void insert(std::string key, std::shared_ptr<M> module) {
    register_module(key, std::move(module));
    keys_.push_back(std::move(key));
  }
  template <AnyModuleHolder H>
  void insert(std::string key, const H& holder) {
    insert(std::move(key), holder.ptr());
  }

  bool contains(const std::string& key) const { return child(key) != nullptr; }
  size_t size() const { return keys_.size(); }
  bool is_empty() const { return keys_.empty(); }
  const std::vector<std::string>& keys() const { return keys_; }
  std::vector<std::shared_ptr<Module>> values() const;
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <class M>
  std::shared_ptr<M> ptr(const std::string& key) const {
    std::shared_ptr<Module> m = (*this)[key];
    std::shared_ptr<M> p = std::dynamic_pointer_cast<M>(m);
    EMBER_CHECK(p, "ModuleDict: module \"", key, "\" is a ", m->name(), ", not the type asked for");
    return p;
  }
  template <class M>
  M& at(const std::string& key) const {
    return *ptr<M>(key);
  }

 private:
  std::vector<std::string> keys_;
};
EMBER_MODULE(ModuleDict);

}  // namespace ember::nn
