#pragma once

// ModuleHolder<Impl> and EMBER_MODULE, as libtorch's: `nn::Linear lin(4, 2)` is a shared handle
// to an `nn::LinearImpl`; `lin->weight` reaches the module and `lin(x)` calls its forward.

#include <concepts>
#include <cstddef>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "ember/core/error.h"

namespace ember::nn {

namespace detail {
// Calls m.forward(args...) with m's forward hooks around it (nn/module.h).
template <class M, class... Args>
auto call_module(M& m, Args&&... args);
}  // namespace detail

template <class Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;

  // Builds the module when it has a default constructor; others need arguments or nullptr.
  ModuleHolder() requires std::is_default_constructible_v<Contained> : impl_(std::make_shared<Contained>()) {}
  // An empty holder, to be assigned later (`nn::Linear lin{nullptr};`).
  ModuleHolder(std::nullptr_t) {}
  // Forwards the arguments to the module's constructor: `nn::Linear(4, 2)`.
  template <class Head, class... Tail>
  requires std::is_constructible_v<Contained, Head&&, Tail&&...>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}

  explicit operator bool() const noexcept { return !is_empty(); }
  bool is_empty() const noexcept { return impl_ == nullptr; }

  Contained* operator->() const { return get(); }
  Contained& operator*() const { return *get(); }
  Contained* get() const {
    EMBER_CHECK(impl_, "ModuleHolder: accessing an empty module holder (constructed from nullptr)");
    return impl_.get();
  }
  const std::shared_ptr<Contained>& ptr() const { return impl_; }

  // Calls the module: its forward, with its forward hooks around it.
  template <class... Args>
  auto operator()(Args&&... args) const {
    return detail::call_module(*get(), std::forward<Args>(args)...);
  }
  // Indexes containers: `seq[0]`, `dict["fc"]`.
  template <class Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*get())[std::forward<Arg>(arg)];
  }

 private:
  std::shared_ptr<Contained> impl_;
};

// Any holder type, including the classes EMBER_MODULE defines.
template <class H>
concept AnyModuleHolder = requires {
  typename H::ContainedType;
}
&&std::derived_from<H, ModuleHolder<typename H::ContainedType>>;

template <class Contained>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Contained>& holder) {
  return os << *holder;
}

}  // namespace ember::nn

// Defines the holder `Name` of the module class `NameImpl` (libtorch's TORCH_MODULE).
#define EMBER_MODULE(Name)                                     \
  class Name : public ::ember::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::ember::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    using Impl = Name##Impl;                                   \
  }
