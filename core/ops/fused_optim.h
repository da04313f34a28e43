#pragma once

// Fused multi-tensor optimizer steps (PyTorch's torch._fused_adam_ / _fused_adamw_ / _fused_sgd_):
// one pass over every element of every parameter instead of a chain of elementwise ops per
// parameter. optim::Adam, AdamW and SGD call them when their options say fused (the default for
// CUDA parameters). The per-element math is in fused_optim_functors.h, shared by both devices.

#include <vector>

#include "ember/core/array_ref.h"
#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

struct FusedAdamArgs {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double weight_decay = 0;
  double eps = 1e-8;
  bool amsgrad = false;
  bool maximize = false;
  bool decoupled_weight_decay = false;  // AdamW: param *= 1 - lr * weight_decay
};

struct FusedSgdArgs {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  bool is_first_step = false;  // momentum buffers are set to the gradient instead of updated
};

// One Adam (AdamW) step, in place. All tensors on one device, dense and laid out as their param
// (contiguous, or channels-last params with channels-last state and gradients); params of one
// floating dtype, the other lists of their param's dtype and shape (max_exp_avg_sqs empty unless
// amsgrad); state_steps float32 with one element each. Each step count is incremented, then
// its bias corrections are used, as PyTorch's _fused_adam_ after its _foreach_add_(steps, 1).
// grad_scale (optional, float32, one element): gradients are divided by it and written back
// unscaled. found_inf (optional, float32, one element): when nonzero nothing changes, steps
// included. lr (optional, float64, one element): the learning rate, in place of args.lr (so a
// CUDA graph that captured the step replays with the rate last written there). All three are read
// where the kernel runs, so a CUDA step needs no host sync.
// float16/bfloat16 tensors are updated with float32 math.
// param_copies (optional: empty, or one per param, undefined where a param has none): float16 or
// bfloat16 copies, all of one dtype, of float32 params, laid out as their params; each is set to
// its param's new value as param.to(dtype) would make it, in the same pass (autocast's kept casts,
// core/autocast_mode.h). Untouched, as the params, when found_inf is set.
void fused_adam_(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                 ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs, ArrayRef<Tensor> state_steps,
                 const FusedAdamArgs& args, const Tensor& grad_scale = {}, const Tensor& found_inf = {},
                 const Tensor& lr = {}, ArrayRef<Tensor> param_copies = {});

// One SGD step, in place; momentum_buffers empty when momentum is 0. Same rules as fused_adam_.
void fused_sgd_(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> momentum_buffers,
                const FusedSgdArgs& args, const Tensor& grad_scale = {}, const Tensor& found_inf = {},
                const Tensor& lr = {}, ArrayRef<Tensor> param_copies = {});

// Index lists of the tensors that share a device and dtype, in order of first appearance: how the
// optimizers (and clip_grad_norm_) split parameter lists into calls of one device and dtype.
std::vector<std::vector<size_t>> group_by_device_and_dtype(ArrayRef<Tensor> tensors);

// The kernels see checked, non-empty lists: same length (max_exp_avg_sqs / momentum_buffers /
// param_copies may be empty), one device, one dtype (but the copies'), dense memory laid out alike
// (zero-size tensors included: they skip them).
using FusedAdamFn = void (*)(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                             ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs,
                             ArrayRef<Tensor> state_steps, const FusedAdamArgs& args,
                             const Tensor& grad_scale, const Tensor& found_inf, const Tensor& lr,
                             ArrayRef<Tensor> param_copies);
using FusedSgdFn = void (*)(ArrayRef<Tensor> params, ArrayRef<Tensor> grads,
                            ArrayRef<Tensor> momentum_buffers, const FusedSgdArgs& args,
                            const Tensor& grad_scale, const Tensor& found_inf, const Tensor& lr,
                            ArrayRef<Tensor> param_copies);
extern DispatchStub<FusedAdamFn> fused_adam_stub;
extern DispatchStub<FusedSgdFn> fused_sgd_stub;

}  // namespace ember
