#pragma once

// The per-element math of the fused optimizer steps (core/ops/fused_optim.h), written once for the
// CPU kernel and the CUDA one. T is the compute type: float for float16/bfloat16/float32 storage,
// double for float64. Each line rounds as the in-place op of the unfused step in optim/ that it
// mirrors (noted beside it), so on the CPU the fused and unfused steps agree bit for bit in
// float32 and float64.

#include <cmath>
#include <type_traits>

#include "ember/core/dtype.h"
#include "ember/core/macros.h"
#include "ember/core/ops/elementwise_functors.h"
#include "ember/core/ops/fused_optim.h"

namespace ember::ops {

// The compute type for storage type S: float16/bfloat16/float32 update in float, float64 in double.
template <class S>
using OptimMath = std::conditional_t<std::is_same_v<S, double>, double, float>;

// Calls f(S{}) for the floating dtypes the fused steps take (the frontends reject the others).
template <class F>
void visit_optim_dtype(ScalarType t, const F& f) {
  visit_dtype(t, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double> || std::is_same_v<S, Half> ||
                  std::is_same_v<S, BFloat16>)
      f(tag);
  });
}

// One Adam step for the elements of one tensor: the bias corrections come from its step count.
template <class T>
struct AdamUpdate {
  T lerp_weight, one_minus_lerp_weight, decay, weight_decay, beta2, one_minus_beta2, neg_step_size,
      bias_correction2_sqrt, eps;
  bool lerp_from_start, has_weight_decay, decoupled, amsgrad, maximize;

  EMBER_HOST_DEVICE AdamUpdate(const FusedAdamArgs& a, float step) {
    double bias_correction1 = 1 - std::pow(a.beta1, static_cast<double>(step));
    double bias_correction2 = 1 - std::pow(a.beta2, static_cast<double>(step));
    double w = 1 - a.beta1;
    lerp_weight = static_cast<T>(w);
    one_minus_lerp_weight = static_cast<T>(1 - w);
    lerp_from_start = w < 0.5;  // lerp's two forms, as PyTorch's lerp_ picks them
    has_weight_decay = a.weight_decay != 0;
    decay = static_cast<T>(1 - a.lr * a.weight_decay);
    weight_decay = static_cast<T>(a.weight_decay);
    beta2 = static_cast<T>(a.beta2);
    one_minus_beta2 = static_cast<T>(1 - a.beta2);
    neg_step_size = static_cast<T>(-(a.lr / bias_correction1));
    bias_correction2_sqrt = static_cast<T>(std::pow(bias_correction2, 0.5));
    eps = static_cast<T>(a.eps);
    decoupled = a.decoupled_weight_decay;
    amsgrad = a.amsgrad;
    maximize = a.maximize;
  }

  // g is the (unscaled) gradient; max_exp_avg_sq is read and written only with amsgrad.
  EMBER_HOST_DEVICE void operator()(T& param, T g, T& exp_avg, T& exp_avg_sq, T& max_exp_avg_sq) const {
    if (maximize) g = -g;
    if (has_weight_decay) {
      if (decoupled)
        param = param * decay;  // param.mul_(1 - lr * wd)
      else
        g = g + weight_decay * param;  // grad.add(param, wd)
    }
    T diff = g - exp_avg;  // exp_avg.lerp_(grad, 1 - beta1)
    exp_avg = lerp_from_start ? exp_avg + lerp_weight * diff : g - one_minus_lerp_weight * diff;
    exp_avg_sq = exp_avg_sq * beta2;                      // exp_avg_sq.mul_(beta2)
    exp_avg_sq = exp_avg_sq + (one_minus_beta2 * g) * g;  // .addcmul_(grad, grad, 1 - beta2)
    T second = exp_avg_sq;
    if (amsgrad) second = max_exp_avg_sq = Maximum<T>()(max_exp_avg_sq, exp_avg_sq);
    T denom = std::sqrt(second) / bias_correction2_sqrt + eps;
    param = param + (neg_step_size * exp_avg) / denom;  // param.addcdiv_(exp_avg, denom, -step_size)
  }
};

template <class T>
struct SgdUpdate {
  T weight_decay, momentum, one_minus_dampening, neg_lr;
  bool has_weight_decay, has_momentum, nesterov, maximize, is_first_step;

  EMBER_HOST_DEVICE explicit SgdUpdate(const FusedSgdArgs& a)
      : weight_decay(static_cast<T>(a.weight_decay)),
        momentum(static_cast<T>(a.momentum)),
        one_minus_dampening(static_cast<T>(1 - a.dampening)),
        neg_lr(static_cast<T>(-a.lr)),
        has_weight_decay(a.weight_decay != 0),
        has_momentum(a.momentum != 0),
        nesterov(a.nesterov),
        maximize(a.maximize),
        is_first_step(a.is_first_step) {}

  // momentum_buffer is read and written only when momentum is nonzero.
  EMBER_HOST_DEVICE void operator()(T& param, T g, T& momentum_buffer) const {
    if (maximize) g = -g;
    if (has_weight_decay) g = g + weight_decay * param;  // grad.add(param, wd)
    if (has_momentum) {
      // buf = grad.clone() on the first step, then buf.mul_(momentum).add_(grad, 1 - dampening)
      momentum_buffer = is_first_step ? g : momentum_buffer * momentum + one_minus_dampening * g;
      g = nesterov ? g + momentum * momentum_buffer : momentum_buffer;  // grad.add(buf, momentum)
    }
    param = param + neg_lr * g;  // param.add_(grad, -lr)
  }
};

}  // namespace ember::ops
