#include "ember/nn/forward_hooks.h"

#include "ember/nn/module.h"

namespace ember::nn {

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  EMBER_CHECK(hook, name(), ": register_forward_pre_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<detail::ForwardHooks>();
  hooks_->pre.emplace_back(hooks_->next_id, std::move(hook));
  return {hooks_, hooks_->next_id++};
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  EMBER_CHECK(hook, name(), ": register_forward_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<detail::ForwardHooks>();
  hooks_->post.emplace_back(hooks_->next_id, std::move(hook));
  return {hooks_, hooks_->next_id++};
}

// Both loops run over copies: a hook may remove itself or register another.
void Module::run_forward_pre_hooks(const std::vector<Tensor>& inputs) {
  if (!hooks_) return;
  auto pre = hooks_->pre;
  for (const auto& [id, hook] : pre) hook(*this, inputs);
}

std::optional<Tensor> Module::run_forward_hooks(const std::vector<Tensor>& inputs,
                                                std::vector<Tensor> outputs) {
  std::optional<Tensor> replaced;
  if (!hooks_) return replaced;
  auto post = hooks_->post;
  for (const auto& [id, hook] : post) {
    if (std::optional<Tensor> r = hook(*this, inputs, outputs)) {
      replaced = *r;
      outputs = {*r};
    }
  }
  return replaced;
}

void RemovableHandle::remove() {
  std::shared_ptr<detail::ForwardHooks> hooks = hooks_.lock();
  if (!hooks) return;
  auto drop = [this](auto& list) { std::erase_if(list, [this](const auto& e) { return e.first == id_; }); };
  drop(hooks->pre);
  drop(hooks->post);
  hooks_.reset();
}

}  // namespace ember::nn
