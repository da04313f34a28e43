// Custom autograd functions: the checks and the recorded node behind Function<Fn>::apply.
#include "ember/autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <optional>

#include "ember/core/factories.h"

namespace ember::autograd {

void AutogradContext::save_for_backward(std::vector<Tensor> to_save) { to_save_ = std::move(to_save); }

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  EMBER_CHECK(grad_ != nullptr, "AutogradContext::get_saved_variables: only available in backward");
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (const SavedTensor& s : saved_) out.push_back((*grad_)(s));
  return out;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  non_differentiable_.insert(non_differentiable_.end(), outputs.begin(), outputs.end());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  EMBER_CHECK(index < input_of_arg_.size(), "AutogradContext::needs_input_grad: argument ", index,
              " out of range for a forward of ", input_of_arg_.size(), " arguments");
  const int i = input_of_arg_[index];
  return i >= 0 && grad_ != nullptr && grad_->needs(static_cast<size_t>(i));
}

std::string FunctionRecorder::node_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  // The class's own name: past the last "::" outside template arguments.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name[i] == ':' && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start) + "Backward";
}

std::vector<uint32_t> FunctionRecorder::begin(AutogradContext& ctx, const std::vector<int>& input_of_arg,
                                              const std::vector<Tensor>& inputs) {
  ctx.input_of_arg_ = input_of_arg;
  std::vector<uint32_t> versions;
  for (const Tensor& t : inputs) versions.push_back(t.defined() ? t._version() : 0);
  return versions;
}

namespace {

bool same_as_any(const Tensor& t, const std::vector<Tensor>& list) {
  for (const Tensor& u : list)
    if (u.defined() && t.is_same(u)) return true;
  return false;
}

}  // namespace

void FunctionRecorder::finish(const char* name, const std::shared_ptr<AutogradContext>& ctx,
                              const std::vector<Tensor>& inputs, const std::vector<uint32_t>& versions,
                              std::vector<Tensor>& outputs, bool record_node, Backward backward) {
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(!inputs[i].defined() || !inputs[i].requires_grad() || inputs[i]._version() == versions[i],
                name, ": forward modified tensor input ", i,
                " in place, and it requires grad (ember's Function has no mark_dirty)");
  if (!record_node) return;
  // Which outputs get this node: defined floating ones not marked otherwise. An output that is
  // an input comes back as a new tensor on the same data, so the input keeps its own history.
  std::vector<int> slot(outputs.size(), -1);
  std::vector<Tensor> differentiable;
  std::vector<Tensor> original = outputs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    if (!o.defined()) continue;
    const bool marked = same_as_any(o, ctx->non_differentiable_);
    if (same_as_any(o, inputs)) o = o.detach();
    if (marked || !o.is_floating_point()) continue;
    slot[k] = static_cast<int>(differentiable.size());
    differentiable.push_back(o);
  }
  // Saved inputs and outputs as SavedTensors (an output without keeping its own node alive).
  for (const Tensor& t : ctx->to_save_) {
    int out = -1;
    for (size_t k = 0; k < original.size() && !same_as_any(t, inputs); ++k)
      if (original[k].defined() && t.is_same(original[k]) && slot[k] >= 0) out = slot[k];
    ctx->saved_.push_back(
        out >= 0 ? SavedTensor(differentiable[static_cast<size_t>(out)], true, static_cast<uint32_t>(out))
                 : SavedTensor(t, false));
  }
  ctx->to_save_.clear();
  // Zeros stand for the gradients of outputs without one.
  std::vector<std::optional<std::pair<DimVector, TensorOptions>>> metas;
  for (const Tensor& o : outputs)
    metas.push_back(o.defined() ? std::optional(std::pair(DimVector(o.sizes()), o.options())) : std::nullopt);
  if (differentiable.empty()) return;
  const size_t n_inputs = inputs.size();
  record(name, inputs, differentiable,
         [ctx, backward, slot, metas, name, n_inputs](const GradContext& g) -> std::vector<Tensor> {
           std::vector<Tensor> grads;
           for (size_t k = 0; k < slot.size(); ++k)
             grads.push_back(slot[k] >= 0 ? g.grad(static_cast<size_t>(slot[k]))
                             : metas[k]   ? zeros(metas[k]->first, metas[k]->second)
                                          : Tensor());
           struct Scope {  // the context sees the node only while backward runs
             AutogradContext& c;
             Scope(AutogradContext& c, const GradContext& g) : c(c) { c.grad_ = &g; }
             ~Scope() { c.grad_ = nullptr; }
           } scope(*ctx, g);
           std::vector<Tensor> result = backward(ctx.get(), std::move(grads));
           const std::vector<int>& input_of_arg = ctx->input_of_arg_;
           EMBER_CHECK(result.size() == input_of_arg.size(), name, ": backward returned ", result.size(),
                       " gradients, expected ", input_of_arg.size(), " (one per forward argument)");
           std::vector<Tensor> out(n_inputs);
           for (size_t a = 0; a < result.size(); ++a) {
             const int i = input_of_arg[a];
             if (i < 0) {
               EMBER_CHECK(!result[a].defined(), name, ": backward returned a gradient for argument ", a,
                           ", which is not a tensor");
               continue;
             }
             if (g.needs(static_cast<size_t>(i))) out[static_cast<size_t>(i)] = result[a];
           }
           return out;
         });
}

}  // namespace ember::autograd
