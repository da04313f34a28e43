#include "ember/nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <sstream>

#include "ember/core/autograd_meta.h"
#include "ember/core/dispatch.h"
#include "ember/core/grad_mode.h"

namespace ember::nn {
namespace {

// "ember::testing::NetImpl" -> "Net".
std::string class_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string full = status == 0 ? demangled : type.name();
  std::free(demangled);
  size_t colon = full.rfind("::");
  std::string name = colon == std::string::npos ? full : full.substr(colon + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.resize(name.size() - 4);
  return name;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string s;
  for (const std::string& k : keys) s += (s.empty() ? "\"" : ", \"") + k + "\"";
  return s;
}

}  // namespace

const std::string& Module::name() const {
  if (name_.empty()) name_ = class_name(typeid(*this));
  return name_;
}

// --- Registration ---

void Module::check_new_name(const char* what, const std::string& name) const {
  EMBER_CHECK(!name.empty(), what, ": the name must not be empty (in ", this->name(), ")");
  EMBER_CHECK(name.find('.') == std::string::npos, what, ": name \"", name, "\" must not contain a dot (in ",
              this->name(), ")");
  const char* taken = parameters_.contains(name) ? "a parameter"
                      : buffers_.contains(name)  ? "a buffer"
                      : children_.contains(name) ? "a submodule"
                                                 : nullptr;
  EMBER_CHECK(!taken, what, ": \"", name, "\" is already ", taken, " of ", this->name());
}

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_new_name("register_parameter", name);
  if (tensor.defined()) {
    EMBER_CHECK(tensor.is_leaf(), "register_parameter: parameter \"", name,
                "\" must be a leaf tensor, but it was computed by ", tensor.grad_fn()->name(),
                " (register tensor.detach())");
    EMBER_CHECK(!requires_grad || tensor.is_floating_point(), "register_parameter: parameter \"", name,
                "\" has dtype ", tensor.dtype(), "; only floating point parameters can require grad");
    tensor.requires_grad_(requires_grad);
  }
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor& Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_new_name("register_buffer", name);
  if (!persistent) non_persistent_buffers_.insert(name);
  return buffers_.insert(std::move(name), std::move(tensor));
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  EMBER_CHECK(module, "register_module: submodule \"", name, "\" is empty (a null pointer or holder)");
  EMBER_CHECK(module.get() != this, "register_module: ", this->name(), " cannot be its own submodule \"",
              name, "\"");
  children_.insert(std::move(name), std::move(module));
}

// --- Traversal ---

void Module::visit(bool recurse, bool dedupe, const Visitor& fn) const {
  fn("", *this);
  if (!recurse) return;
  std::unordered_set<const Module*> seen{this};
  visit_children("", dedupe ? &seen : nullptr,
                 [&fn](const std::string& path, const std::shared_ptr<Module>& m) { fn(path + ".", *m); });
}

void Module::visit_children(const std::string& prefix, std::unordered_set<const Module*>* seen,
                            const ChildVisitor& fn) const {
  for (const auto& [key, child] : children_) {
    if (seen && !seen->insert(child.get()).second) continue;
    std::string path = prefix + key;
    fn(path, child);
    child->visit_children(path + ".", seen, fn);
  }
}

OrderedDict<Tensor> Module::named_tensors(bool recurse, bool buffers) const {
  OrderedDict<Tensor> result;
  std::unordered_set<const TensorImpl*> seen;
  visit(recurse, /*dedupe=*/true, [&](const std::string& prefix, const Module& m) {
    for (const auto& [key, t] : buffers ? m.buffers_ : m.parameters_)
      if (t.defined() && seen.insert(t.unsafe_impl()).second) result.insert(prefix + key, t);
  });
  return result;
}

OrderedDict<Tensor> Module::named_parameters(bool recurse) const { return named_tensors(recurse, false); }
std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }
OrderedDict<Tensor> Module::named_buffers(bool recurse) const { return named_tensors(recurse, true); }
std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

OrderedDict<std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::shared_ptr<Module>> result;
  std::unordered_set<const Module*> seen;
  for (const auto& [key, child] : children_)
    if (seen.insert(child.get()).second) result.insert(key, child);
  return result;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  const std::shared_ptr<Module>* m = children_.find(name);
  return m ? *m : nullptr;
}

std::vector<std::shared_ptr<Module>> Module::children() const { return named_children().values(); }

std::shared_ptr<Module> Module::self(const char* what) const {
  std::shared_ptr<Module> p = const_cast<Module*>(this)->weak_from_this().lock();
  EMBER_CHECK(p, what, ": ", name(),
              " is not held by a shared_ptr or a module holder, so it cannot list itself (pass "
              "include_self = false)");
  return p;
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules(const std::string& prefix,
                                                           bool include_self) const {
  OrderedDict<std::shared_ptr<Module>> result;
  if (include_self) result.insert(prefix, self("named_modules"));
  std::unordered_set<const Module*> seen{this};
  visit_children(prefix.empty() ? "" : prefix + ".", &seen,
                 [&](const std::string& path, const std::shared_ptr<Module>& m) { result.insert(path, m); });
  return result;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) const {
  return named_modules("", include_self).values();
}

void Module::apply(const std::function<void(Module&)>& fn) {
  apply([&fn](const std::string&, Module& m) { fn(m); });
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn) { apply_named(fn, ""); }

void Module::apply_named(const std::function<void(const std::string&, Module&)>& fn,
                         const std::string& prefix) {
  for (const auto& [key, child] : named_children())
    child->apply_named(fn, prefix.empty() ? key : prefix + "." + key);
  fn(prefix, *this);
}

// --- Modes and conversions ---

void Module::train(bool on) {
  is_training_ = on;
  for (const auto& [key, child] : children_) child->train(on);
}

void Module::convert(const std::function<Tensor(const Tensor&)>& fn) {
  NoGradGuard no_grad;
  std::unordered_set<const TensorImpl*> seen;
  auto convert_one = [&](const Tensor& t) {
    if (!t.defined() || !seen.insert(t.unsafe_impl()).second) return;
    if (Tensor c = fn(t); !c.is_same(t)) t.set_data(c);
    if (Tensor g = t.grad(); g.defined())
      if (Tensor c = fn(g); !c.is_same(g)) g.set_data(c);
  };
  visit(true, true, [&](const std::string&, const Module& m) {
    for (const auto& [key, t] : m.parameters_) convert_one(t);
    for (const auto& [key, t] : m.buffers_) convert_one(t);
  });
}

namespace {
void check_floating_dtype(ScalarType dtype) {
  EMBER_CHECK(is_floating_point(dtype), "Module::to: only floating point dtypes are allowed, got ", dtype);
}
}  // namespace

void Module::to(Device device) {
  convert([device](const Tensor& t) { return t.to(device); });
}

void Module::to(ScalarType dtype) {
  check_floating_dtype(dtype);
  convert([dtype](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
}

void Module::to(Device device, ScalarType dtype) {
  check_floating_dtype(dtype);
  convert([=](const Tensor& t) { return t.is_floating_point() ? t.to(device, dtype) : t.to(device); });
}

void Module::to(MemoryFormat memory_format) {
  convert([memory_format](const Tensor& t) {
    return t.dim() == 4 ? t.to(t.options().memory_format(memory_format)) : t;
  });
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.detach_();
      g.zero_();
    }
  }
}

void Module::requires_grad_(bool requires_grad) {
  for (const Tensor& p : parameters()) p.requires_grad_(requires_grad);
}

// --- State ---

OrderedDict<Tensor> Module::state_dict() const {
  OrderedDict<Tensor> result;
  visit(true, /*dedupe=*/false, [&](const std::string& prefix, const Module& m) {
    for (const auto& [key, t] : m.parameters_)
      if (t.defined()) result.insert(prefix + key, t.detach());
    for (const auto& [key, t] : m.buffers_)
      if (t.defined() && !m.non_persistent_buffers_.count(key)) result.insert(prefix + key, t.detach());
  });
  return result;
}

IncompatibleKeys Module::load_state_dict(const OrderedDict<Tensor>& state_dict, bool strict) {
  // Our tensors by key: the same key set as state_dict() gives.
  OrderedDict<Tensor> own = this->state_dict();
  IncompatibleKeys keys;
  std::vector<std::string> errors;
  for (const auto& [key, target] : own) {
    const Tensor* src = state_dict.find(key);
    if (!src) {
      keys.missing_keys.push_back(key);
    } else if (!src->defined()) {
      errors.push_back("\"" + key + "\" is undefined in the state dict");
    } else if (!src->sizes().equals(target.sizes())) {
      errors.push_back(
          ember::detail::str_cat("size mismatch for ", key, ": copying a param with shape ", src->sizes(),
                                 " from checkpoint, the shape in current model is ", target.sizes()));
    } else if (src->dtype() != target.dtype()) {
      errors.push_back(ember::detail::str_cat("dtype mismatch for ", key, ": the checkpoint has ",
                                              src->dtype(), ", the model ", target.dtype(),
                                              " (convert one with to())"));
    }
  }
  for (const auto& [key, t] : state_dict)
    if (!own.contains(key)) keys.unexpected_keys.push_back(key);
  std::string message;
  if (strict && !keys.missing_keys.empty()) message += "; missing key(s) " + quoted_list(keys.missing_keys);
  if (strict && !keys.unexpected_keys.empty())
    message += "; unexpected key(s) " + quoted_list(keys.unexpected_keys);
  for (const std::string& e : errors) message += "; " + e;
  EMBER_CHECK(message.empty(), "load_state_dict: error(s) in loading state_dict for ", name(), ": ",
              message.substr(2));
  NoGradGuard no_grad;
  for (const auto& [key, target] : own)
    if (const Tensor* src = state_dict.find(key)) target.copy_(*src);
  return keys;
}

// --- Printing ---

void Module::pretty_print(std::ostream& os) const {
  std::string extra = extra_repr();
  os << name() << "(";
  if (children_.empty()) {
    os << extra << ")";
    return;
  }
  os << "\n";
  if (!extra.empty()) os << "  " << extra << "\n";
  for (const auto& [key, child] : children_) {
    std::ostringstream child_repr;
    child->pretty_print(child_repr);
    // Nested lines get two more spaces of indent.
    std::string s = child_repr.str();
    for (size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', at + 1)) s.insert(at + 1, "  ");
    os << "  (" << key << "): " << s << "\n";
  }
  os << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  module.pretty_print(os);
  return os;
}

}  // namespace ember::nn

namespace ember::nn::detail {

ModuleRange::ModuleRange(const Module& m) {
  const ember::detail::KernelRangeHooks* hooks =
      ember::detail::g_kernel_range_hooks.load(std::memory_order_acquire);
  const bool range = hooks && hooks->push_copied, record = ember::detail::recording_allocation_context();
  if (!range && !record) return;
  const std::string name = "nn.Module: " + m.name();
  if (record) context_.emplace(name);
  if (range) {
    hooks->push_copied(name.c_str());
    pop_ = hooks->pop;
  }
}

ModuleRange::~ModuleRange() {
  if (pop_) pop_();
}

}  // namespace ember::nn::detail
