#pragma once

// Custom differentiable operations, as torch::autograd::Function: a class with a static forward
// and a static backward. Fn::apply(args...) runs forward with grad mode off (its inner ops record
// nothing) and, when some tensor argument requires grad, records one node "FnBackward" whose
// backward is Fn::backward.
//
//   struct MulConstant : autograd::Function<MulConstant> {
//     static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double c) {
//       ctx->saved_data["c"] = c;
//       return x * c;
//     }
//     static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
//       return {grads[0] * std::any_cast<double>(ctx->saved_data["c"]), Tensor()};  // none for c
//     }
//   };
//   Tensor y = MulConstant::apply(x, 2.0);
//
// Mixed precision (torch.amp.custom_fwd / custom_bwd) is declared in the class:
//   static constexpr amp::CustomFwd custom_fwd{kCUDA, kFloat32};  // forward in float32
//   static constexpr amp::CustomBwd custom_bwd{kCUDA};            // backward as forward ran
//
// forward takes the context, then any arguments (the Tensor ones are the node's inputs), and
// returns a Tensor or a std::vector<Tensor>. backward gets one gradient per output (zeros for an
// output that was not used) and returns one per forward argument: undefined for non-tensors and
// for inputs that need none. Unlike PyTorch there is no mark_dirty: a forward that modifies a
// tensor argument which requires grad in place is refused.

#include <any>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/grad_mode.h"

namespace ember::amp {

// torch.amp.custom_fwd: inside an autocast region of device_type, a Function with cast_inputs runs
// forward with autocast off and its floating tensor arguments on that device (float64 ones excepted)
// cast to cast_inputs, differentiably; without cast_inputs, forward runs in the region as any code.
struct CustomFwd {
  DeviceType device_type;
  std::optional<ScalarType> cast_inputs = std::nullopt;
};
// torch.amp.custom_bwd: backward runs in the autocast state forward ran in (off after a cast), for
// a Function that also declares custom_fwd.
struct CustomBwd {
  DeviceType device_type;
};

}  // namespace ember::amp

namespace ember::autograd {

template <class Fn>
struct Function;

class AutogradContext {
 public:
  // Tensors backward needs (inputs or outputs), checked as any saved tensor: one changed in place
  // after the forward is an error at backward. Call once, in forward.
  void save_for_backward(std::vector<Tensor> to_save);
  // The saved tensors, in backward.
  std::vector<Tensor> get_saved_variables() const;
  // Outputs that have no gradient (indices, masks): they do not require grad, and backward gets
  // zeros for them. In forward.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  // Whether forward argument `index` (counting every argument) needs its gradient; in backward.
  bool needs_input_grad(size_t index) const;
  // Anything else backward needs (PyTorch keeps IValues here; ember any value).
  std::unordered_map<std::string, std::any> saved_data;

 private:
  friend struct FunctionRecorder;
  template <class Fn>
  friend struct Function;
  std::vector<Tensor> to_save_;
  std::vector<SavedTensor> saved_;
  std::vector<Tensor> non_differentiable_;
  std::vector<int> input_of_arg_;      // each argument's input index, -1 for non-tensors
  const GradContext* grad_ = nullptr;  // while backward runs
  bool forward_autocast_ = false;      // custom_fwd: the autocast state forward ran in
  ScalarType forward_autocast_dtype_ = kFloat32;
};

// The type-independent part of apply: checks and records the node.
struct FunctionRecorder {
  using Backward = std::vector<Tensor> (*)(AutogradContext*, std::vector<Tensor>);
  // The node's name: the class's, demangled, with "Backward" appended.
  static std::string node_name(const std::type_info& type);
  // Before forward: the context's map from arguments to inputs, and the inputs' versions.
  static std::vector<uint32_t> begin(AutogradContext& ctx, const std::vector<int>& input_of_arg,
                                     const std::vector<Tensor>& inputs);
  // After forward: refuses in-place changes to inputs that require grad, keeps outputs that are
  // inputs from taking their history, and records the node when `record_node`.
  static void finish(const char* name, const std::shared_ptr<AutogradContext>& ctx,
                     const std::vector<Tensor>& inputs, const std::vector<uint32_t>& versions,
                     std::vector<Tensor>& outputs, bool record_node, Backward backward);
};

template <class Fn>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    if constexpr (requires { Fn::custom_fwd; }) {
      constexpr amp::CustomFwd fwd = Fn::custom_fwd;
      if (fwd.cast_inputs && amp::is_autocast_enabled(fwd.device_type)) {
        // Cast where the graph sees it (the casts' backward returns each gradient in its input's dtype).
        auto cast = [&](auto&& a) -> decltype(auto) {
          if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) {
            const bool castable = a.defined() && a.is_floating_point() && a.dtype() != kFloat64 &&
                                  a.device().type == fwd.device_type;
            return castable ? a.to(*fwd.cast_inputs) : a;
          } else {
            return std::forward<decltype(a)>(a);
          }
        };
        amp::AutocastGuard off(fwd.device_type, std::nullopt, /*enabled=*/false);
        return apply_now(cast(std::forward<Args>(args))...);
      }
    }
    return apply_now(std::forward<Args>(args)...);
  }

 private:
  // custom_bwd: backward in the autocast state custom_fwd recorded.
  static std::vector<Tensor> backward_in_forward_autocast(AutogradContext* ctx, std::vector<Tensor> grads) {
    amp::AutocastGuard autocast(Fn::custom_bwd.device_type, ctx->forward_autocast_dtype_,
                                ctx->forward_autocast_);
    return Fn::backward(ctx, std::move(grads));
  }

  template <class... Args>
  static auto apply_now(Args&&... args) {
    static const std::string name = FunctionRecorder::node_name(typeid(Fn));
    auto ctx = std::make_shared<AutogradContext>();
    FunctionRecorder::Backward backward = &Fn::backward;
    if constexpr (requires { Fn::custom_fwd; }) {
      ctx->forward_autocast_ = amp::is_autocast_enabled(Fn::custom_fwd.device_type);
      ctx->forward_autocast_dtype_ = amp::get_autocast_dtype(Fn::custom_fwd.device_type);
    }
    if constexpr (requires { Fn::custom_bwd; }) {
      static_assert(
          requires { Fn::custom_fwd; }, "a Function with custom_bwd declares custom_fwd too");
      backward = &backward_in_forward_autocast;
    }
    std::vector<Tensor> inputs;
    std::vector<int> input_of_arg;
    auto collect = [&](const auto& a) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) {
        input_of_arg.push_back(static_cast<int>(inputs.size()));
        inputs.push_back(a);
      } else {
        input_of_arg.push_back(-1);
      }
    };
    (collect(args), ...);
    const bool grad = needs_grad(inputs);
    const std::vector<uint32_t> versions = FunctionRecorder::begin(*ctx, input_of_arg, inputs);
    auto result = [&] {
      NoGradGuard no_grad;
      return Fn::forward(ctx.get(), std::forward<Args>(args)...);
    }();
    using Result = decltype(result);
    static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                  "Function::forward returns a Tensor or a std::vector<Tensor>");
    if constexpr (std::is_same_v<Result, Tensor>) {
      std::vector<Tensor> outputs{result};
      FunctionRecorder::finish(name.c_str(), ctx, inputs, versions, outputs, grad, backward);
      return outputs[0];
    } else {
      FunctionRecorder::finish(name.c_str(), ctx, inputs, versions, result, grad, backward);
      return result;
    }
  }
};

}  // namespace ember::autograd
