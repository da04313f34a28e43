#pragma once

// nn::Module, the base of every layer and model, as libtorch's (with PyTorch's state_dict,
// apply order and printing). A module owns named parameters, buffers and submodules; the
// recursive listings name them by path ("layer1.0.conv1.weight").

#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_set>
#include <vector>

#include "ember/core/allocation_context.h"
#include "ember/core/ordered_dict.h"
#include "ember/core/state_dict.h"
#include "ember/core/tensor.h"
#include "ember/nn/forward_hooks.h"
#include "ember/nn/module_holder.h"

namespace ember::nn {

// The keys load_state_dict(strict=false) skipped (PyTorch's _IncompatibleKeys).
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  // `name` is what printing shows ("Linear"); without one, the class name less a trailing "Impl".
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module() = default;
  virtual ~Module() = default;
  // Parameters are shared handles: a copied module would silently alias them.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const;

  // --- Registration. A name is non-empty, has no '.', and is unique among this module's
  // parameters, buffers and submodules. Undefined tensors are kept but never listed. ---
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // Non-persistent buffers are left out of state_dict.
  Tensor& register_buffer(std::string name, Tensor tensor, bool persistent = true);
  template <class M>
  requires std::derived_from<M, Module> std::shared_ptr<M> register_module(std::string name,
                                                                           std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  template <AnyModuleHolder H>
  H register_module(std::string name, H holder) {
    add_child(std::move(name), holder.ptr());
    return holder;
  }

  // --- Traversal, pre-order (a module's own entries, then its children's). A tensor or module
  // reachable along two paths is listed once, under the first. ---
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  // With include_self, this module comes first (named `prefix`); it must then be held by a
  // shared_ptr or a module holder.
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true) const;
  OrderedDict<std::shared_ptr<Module>> named_modules(const std::string& prefix = "",
                                                     bool include_self = true) const;
  // Calls fn on every submodule, then on this module (PyTorch's order: `model->apply(init)`).
  void apply(const std::function<void(Module&)>& fn);
  // The same, with each module's path ("" for this one).
  void apply(const std::function<void(const std::string&, Module&)>& fn);

  // --- Modes and conversions (recursive) ---
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const noexcept { return is_training_; }
  // Parameters (and their gradients) and buffers keep their identity: their data is replaced
  // (Tensor::set_data), so an optimizer built earlier still holds them. A dtype applies to
  // floating point tensors only, as in PyTorch.
  void to(Device device);
  void to(ScalarType dtype);
  void to(Device device, ScalarType dtype);
  // Lays out every 4-D parameter and buffer (and gradient) in `memory_format`, as PyTorch's
  // `model.to(memory_format=torch.channels_last)`; the others stay as they are.
  void to(MemoryFormat memory_format);
  void zero_grad(bool set_to_none = true);
  void requires_grad_(bool requires_grad = true);

  // --- State. Keys are paths; values alias the module's tensors (detached). ---
  OrderedDict<Tensor> state_dict() const;
  // Copies each entry into the matching parameter or persistent buffer (under no_grad). Every
  // problem is collected and reported in one error before anything is copied: missing and
  // unexpected keys (strict only; otherwise returned), shape and dtype mismatches (always).
  IncompatibleKeys load_state_dict(const OrderedDict<Tensor>& state_dict, bool strict = true);
  // The tensors of a file `ember::load` read: model->load_state_dict(ember::load(path)).
  IncompatibleKeys load_state_dict(const StateDict& state, bool strict = true) {
    return load_state_dict(state.tensors, strict);
  }

  // --- Forward hooks (nn/forward_hooks.h), run in registration order. ---
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);
  bool has_forward_hooks() const noexcept {
    return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty());
  }
  void run_forward_pre_hooks(const std::vector<Tensor>& inputs);
  // The last replacement a hook returned, if any.
  std::optional<Tensor> run_forward_hooks(const std::vector<Tensor>& inputs, std::vector<Tensor> outputs);

  // --- Printing: `os << *module` gives PyTorch's repr, a tree of `name()(extra_repr())`. ---
  virtual std::string extra_repr() const { return ""; }
  virtual void pretty_print(std::ostream& os) const;

 protected:
  // The direct submodule `name`, or null.
  std::shared_ptr<Module> child(const std::string& name) const;

 private:
  using Visitor = std::function<void(const std::string& prefix, const Module& m)>;
  using ChildVisitor = std::function<void(const std::string& path, const std::shared_ptr<Module>& m)>;
  // fn(prefix, m) for this module (prefix "") and, when recurse, every submodule (prefix
  // "path."), pre-order; `dedupe` visits a module reachable along two paths once.
  void visit(bool recurse, bool dedupe, const Visitor& fn) const;
  // fn(prefix + path, child) for every submodule, pre-order; skips those in `seen` (if given).
  void visit_children(const std::string& prefix, std::unordered_set<const Module*>* seen,
                      const ChildVisitor& fn) const;
  void apply_named(const std::function<void(const std::string&, Module&)>& fn, const std::string& prefix);
  OrderedDict<Tensor> named_tensors(bool recurse, bool buffers) const;
  void check_new_name(const char* what, const std::string& name) const;
  void add_child(std::string name, std::shared_ptr<Module> module);
  std::shared_ptr<Module> self(const char* what) const;
  void convert(const std::function<Tensor(const Tensor&)>& fn);

  mutable std::string name_;
  OrderedDict<Tensor> parameters_;
  OrderedDict<Tensor> buffers_;
  std::unordered_set<std::string> non_persistent_buffers_;
  OrderedDict<std::shared_ptr<Module>> children_;
  bool is_training_ = true;
  std::shared_ptr<detail::ForwardHooks> hooks_;  // created by the first registration
};

std::ostream& operator<<(std::ostream& os, const Module& module);

namespace detail {
// While a profiler session or emit_nvtx is on, a range around a module's call, named
// "nn.Module: <name>" (the kernels it calls nest inside), and while memory history is recorded,
// the name of what it allocates; otherwise two atomic loads.
class ModuleRange {
 public:
  explicit ModuleRange(const Module& m);
  ~ModuleRange();
  ModuleRange(const ModuleRange&) = delete;
  ModuleRange& operator=(const ModuleRange&) = delete;

 private:
  void (*pop_)() = nullptr;
  std::optional<ember::detail::AllocationContext> context_;
};

template <class M, class... Args>
auto call_module(M& m, Args&&... args) {
  ModuleRange range(m);
  using R = decltype(m.forward(std::forward<Args>(args)...));
  if (!m.has_forward_hooks()) return m.forward(std::forward<Args>(args)...);
  std::vector<Tensor> inputs;
  (append_tensors(inputs, args), ...);
  m.run_forward_pre_hooks(inputs);
  if constexpr (std::is_void_v<R>) {
    m.forward(std::forward<Args>(args)...);
    m.run_forward_hooks(inputs, {});
  } else {
    std::decay_t<R> out = m.forward(std::forward<Args>(args)...);
    std::vector<Tensor> outputs;
    append_tensors(outputs, out);
    std::optional<Tensor> replaced = m.run_forward_hooks(inputs, std::move(outputs));
    if (replaced) {
      if constexpr (std::is_same_v<std::decay_t<R>, Tensor>)
        out = *replaced;
      else
        EMBER_CHECK(false, m.name(),
                    ": a forward hook returned a replacement output, but this module's forward ",
                    "does not return a Tensor");
    }
    return out;
  }
}
}  // namespace detail

}  // namespace ember::nn
