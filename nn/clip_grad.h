#pragma once

// Gradient clipping, as torch.nn.utils: everything stays on the gradients' device (the total
// norm is a 0-dim tensor and the clip coefficient a tensor multiply), so nothing waits for the
// device unless error_if_nonfinite asks to look at the norm.

#include <optional>

#include "ember/core/array_ref.h"
#include "ember/core/tensor.h"

namespace ember::nn::utils {

// The norm_type norm of all tensors seen as one vector (the norm of their norms); inf for the
// max norm. A 0-dim tensor on the first tensor's device; zero (float32, CPU) for no tensors.
// `foreach` is accepted for PyTorch's signature; ember computes the same per-tensor norms
// either way.
Tensor get_total_norm(ArrayRef<Tensor> tensors, double norm_type = 2, bool error_if_nonfinite = false,
                      std::optional<bool> foreach = std::nullopt);

// Scales each parameter's gradient by min(max_norm / (total_norm + 1e-6), 1).
void clip_grads_with_norm_(ArrayRef<Tensor> parameters, double max_norm, const Tensor& total_norm,
                           std::optional<bool> foreach = std::nullopt);

// get_total_norm of the gradients, then clip_grads_with_norm_; returns the total norm (before
// clipping). Parameters without a gradient are skipped.
Tensor clip_grad_norm_(ArrayRef<Tensor> parameters, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false, std::optional<bool> foreach = std::nullopt);

// Clamps each gradient to [-clip_value, clip_value].
void clip_grad_value_(ArrayRef<Tensor> parameters, double clip_value,
                      std::optional<bool> foreach = std::nullopt);

}  // namespace ember::nn::utils
