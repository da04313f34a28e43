#include "ember/nn/container.h"

namespace ember::nn {

namespace detail {

std::shared_ptr<Module> ModuleSequence::operator[](int64_t index) const {
  int64_t n = static_cast<int64_t>(modules_.size());
  EMBER_CHECK(index >= -n && index < n, name(), ": index ", index, " is out of range for ", n, " modules");
  return modules_[index < 0 ? index + n : index];
}

void ModuleSequence::append(std::string name, std::shared_ptr<Module> module) {
  register_module(std::move(name), module);
  modules_.push_back(std::move(module));
}

}  // namespace detail

Tensor SequentialImpl::forward(const Tensor& input) { return forward_range(input, 0, size()); }

Tensor SequentialImpl::forward_range(const Tensor& input, size_t begin, size_t end) {
  EMBER_CHECK(begin <= end && end <= size(), "Sequential: range [", begin, ", ", end,
              ") is out of bounds for ", size(), " modules");
  Tensor x = input;
  for (size_t i = begin; i < end; ++i) x = forwards_[i](x);
  return x;
}

ModuleDictImpl::ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
    : ModuleDictImpl() {
  for (const auto& [key, module] : modules) insert(key, module);
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  std::shared_ptr<Module> m = child(key);
  EMBER_CHECK(m, "ModuleDict: no module \"", key, "\"");
  return m;
}

std::vector<std::shared_ptr<Module>> ModuleDictImpl::values() const {
  std::vector<std::shared_ptr<Module>> v;
  for (const std::string& key : keys_) v.push_back(child(key));
  return v;
}

}  // namespace ember::nn
