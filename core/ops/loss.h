#pragma once

// Losses with PyTorch's semantics and argument order. `reduction` is "mean", "sum" or "none".

#include <string_view>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

enum class Reduction : int8_t { None, Mean, Sum };
// Parses PyTorch's reduction names; throws naming `op` for anything else.
Reduction parse_reduction(const char* op, std::string_view reduction);

// input is (C), (N, C) or (N, C, d1, ...). target holds class indices (int64, shaped like input
// without the class dim) or class probabilities (floating, shaped like input). The weighted mean
// divides by the summed weights of the non-ignored targets; label_smoothing mixes the target with
// the uniform distribution. A mean over no targets is NaN.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     int64_t ignore_index = -100, std::string_view reduction = "mean",
                     double label_smoothing = 0.0);
// log_probs is (C), (N, C) or (N, C, d1, ...); target int64 class indices.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, std::string_view reduction = "mean");
// (input - target)^2, the two broadcast together.
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
// target has input's shape; weight and pos_weight broadcast to it (pos_weight along the classes
// of the last dim).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        std::string_view reduction = "mean", const Tensor& pos_weight = {});

// Kernel families. Every tensor is contiguous and, unless said, in the compute dtype (float64
// for float64 inputs, else float32).
// out (0-dim) = the sum of all elements of in.
using LossSumFn = void (*)(const Tensor& out, const Tensor& in);
// For logp [N, C, D] and int64 target [N, D]: loss = -w[t] * logp[n, t, d] and total_weight = w[t]
// (w = 1 when weight is undefined); smooth, when defined, = -sum_c w[c] * logp[n, c, d]; all 0
// where t == ignore_index. A target outside [0, C) otherwise throws an error naming `op`.
using NllLossFn = void (*)(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth,
                           const Tensor& logp, const Tensor& target, const Tensor& weight,
                           int64_t ignore_index, const char* op);
// loss[n, d] = -sum_c logp[n, c, d] * (target[n, c, d] * (1 - ls) + ls / C) * w[c].
using SoftCrossEntropyFn = void (*)(const Tensor& loss, const Tensor& logp, const Tensor& target,
                                    const Tensor& weight, double label_smoothing);
// out = ops::BceWithLogits(x, t, pos_weight) with x and t of any floating dtype and pos_weight
// broadcast to out's shape.
using BceWithLogitsFn = void (*)(const Tensor& out, const Tensor& x, const Tensor& t,
                                 const Tensor& pos_weight);
// cross_entropy with class targets in one pass over the logits: for input [N, C, D] in its own
// floating dtype (its [C, D] blocks contiguous and input.stride(0) apart), lse[n, d] = logsumexp_c input[n, c, d], and loss, total_weight and smooth as
// NllLossFn gives them for logp = input - lse. Everything but input in the compute dtype.
using CrossEntropyForwardFn = void (*)(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth,
                                       const Tensor& lse, const Tensor& input, const Tensor& target,
                                       const Tensor& weight, int64_t ignore_index, const char* op);
// cross_entropy's input gradient for class targets, with p = exp(x - lse[n, d]) the softmax of
// x = input [N, C, D] over the classes: gx = ge * (p * s - (1 - ls) * w[t] * [c == t] - ls / C * w[c])
// with s = (1 - ls) * w[t] + ls / C * weight_sum, t = target[n, d] and ge = grad[n, d] (grad[0]
// when grad has one element); 0 where t == ignore_index. Without weight, w = 1 and weight_sum = C;
// weight_sum (0-dim) is needed with weight and ls > 0. gx and input are in the input's dtype, their
// [C, D] blocks contiguous and each tensor's stride(0) apart (padded rows); grad, lse [N, D], weight and
// weight_sum in the compute dtype. sums, when defined (D == 1 only), gets gx's sums over N in the compute
// dtype: the bias gradient of the linear before it (BackwardExtras).
using CrossEntropyBackwardFn = void (*)(const Tensor& gx, const Tensor& sums, const Tensor& grad,
                                        const Tensor& input, const Tensor& lse, const Tensor& target,
                                        const Tensor& weight, const Tensor& weight_sum, int64_t ignore_index,
                                        double label_smoothing);
extern DispatchStub<LossSumFn> loss_sum_stub;
extern DispatchStub<NllLossFn> nll_loss_stub;
extern DispatchStub<SoftCrossEntropyFn> soft_cross_entropy_stub;
extern DispatchStub<BceWithLogitsFn> bce_with_logits_stub;
extern DispatchStub<CrossEntropyForwardFn> cross_entropy_forward_stub;
extern DispatchStub<CrossEntropyBackwardFn> cross_entropy_backward_stub;

}  // namespace ember
