#pragma once

// Forward hooks on a module, as PyTorch's register_forward_pre_hook / register_forward_hook: they
// run when the module is called (`m(x)`, and a Sequential calling its children), not on a direct
// `m->forward(x)`, which is PyTorch's split between `m(x)` and `m.forward(x)` too. C++ forwards
// take any arguments, so a hook sees the call's tensors: each Tensor argument, and the elements
// of a std::vector<Tensor> one, in order; the output's tensors likewise (a Tensor, or the Tensors
// of a tuple or pair).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn {

class Module;

// Sees the module and its tensor arguments before forward runs.
using ForwardPreHook = std::function<void(Module& module, const std::vector<Tensor>& inputs)>;
// Sees them and the output's tensors after forward; a Tensor it returns replaces a Tensor output
// (later hooks see the replacement), as a PyTorch hook returning a value does.
using ForwardHook = std::function<std::optional<Tensor>(Module& module, const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& outputs)>;

namespace detail {
// A module's hooks in registration order, each under the id its handle removes.
struct ForwardHooks {
  int64_t next_id = 0;
  std::vector<std::pair<int64_t, ForwardPreHook>> pre;
  std::vector<std::pair<int64_t, ForwardHook>> post;
};
}  // namespace detail

// What register_*_hook returns: remove() unregisters the hook (torch.utils.hooks.RemovableHandle).
// Removing twice, or after the module is gone, does nothing.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<detail::ForwardHooks> hooks, int64_t id)
      : hooks_(std::move(hooks)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<detail::ForwardHooks> hooks_;
  int64_t id_ = -1;
};

namespace detail {

// The tensors of a call's arguments or of its output, as the hooks see them.
template <class T>
void append_tensors(std::vector<Tensor>& out, const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    out.push_back(v);
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    out.insert(out.end(), v.begin(), v.end());
  } else if constexpr (requires { std::tuple_size<D>::value; }) {
    std::apply([&](const auto&... e) { (append_tensors(out, e), ...); }, v);
  }
}

}  // namespace detail
}  // namespace ember::nn
