#include "ember/nn/clip_grad.h"

#include <cmath>
#include <vector>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/fused_optim.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/ops/shape_ops.h"

namespace ember::nn::utils {
namespace {

std::vector<Tensor> grads_of(const char* who, ArrayRef<Tensor> parameters) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    EMBER_CHECK(parameters[i].defined(), who, ": parameter ", i, " is undefined");
    if (Tensor g = parameters[i].grad(); g.defined()) grads.push_back(g);
  }
  return grads;
}

}  // namespace

Tensor get_total_norm(ArrayRef<Tensor> tensors, double norm_type, bool error_if_nonfinite,
                      std::optional<bool>) {
  NoGradGuard no_grad;
  if (tensors.empty()) return zeros({});
  for (size_t i = 0; i < tensors.size(); ++i)
    EMBER_CHECK(tensors[i].defined(), "get_total_norm: tensor ", i, " is undefined");
  // Per device and dtype, as PyTorch orders the norms before the final one.
  const Device first = tensors[0].device();
  std::vector<Tensor> norms;
  for (const std::vector<size_t>& same : group_by_device_and_dtype(tensors))
    for (size_t i : same) norms.push_back(norm(tensors[i], norm_type).to(first));
  Tensor total = norm(stack(norms), norm_type);
  if (error_if_nonfinite) {
    double v = total.item<double>();
    EMBER_CHECK(std::isfinite(v), "clip_grad_norm_: the total norm of order ", norm_type,
                " for gradients from `parameters` is non-finite (", v,
                "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                "norm anyway, set error_if_nonfinite=false");
  }
  return total;
}

void clip_grads_with_norm_(ArrayRef<Tensor> parameters, double max_norm, const Tensor& total_norm,
                           std::optional<bool>) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads = grads_of("clip_grads_with_norm_", parameters);
  if (grads.empty()) return;
  EMBER_CHECK(total_norm.defined() && total_norm.numel() == 1,
              "clip_grads_with_norm_: total_norm must have one "
              "element, got shape ",
              total_norm.defined() ? total_norm.sizes() : IntArrayRef());
  Tensor coef = clamp(max_norm / (total_norm + 1e-6), std::nullopt, 1.0);
  for (const std::vector<size_t>& same : group_by_device_and_dtype(grads)) {
    Tensor c = coef.to(grads[same[0]].device());
    for (size_t i : same) grads[i].mul_(c);
  }
}

Tensor clip_grad_norm_(ArrayRef<Tensor> parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite, std::optional<bool> foreach) {
  Tensor total =
      get_total_norm(grads_of("clip_grad_norm_", parameters), norm_type, error_if_nonfinite, foreach);
  clip_grads_with_norm_(parameters, max_norm, total, foreach);
  return total;
}

void clip_grad_value_(ArrayRef<Tensor> parameters, double clip_value, std::optional<bool>) {
  NoGradGuard no_grad;
  for (const Tensor& g : grads_of("clip_grad_value_", parameters)) g.clamp_(-clip_value, clip_value);
}

}  // namespace ember::nn::utils
