#include "ember/nn/normalization.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/normalization.h"
#include "ember/nn/functional.h"
#include "ember/nn/init.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {

using ember::detail::str_cat;

// --- BatchNorm ---

BatchNormImplBase::BatchNormImplBase(std::string name, const BatchNormOptions& options_)
    : Module(std::move(name)), options(options_) {
  int64_t c = options.num_features();
  EMBER_CHECK(c > 0, this->name(), ": num_features must be positive, got ", c);
  if (options.affine()) {
    weight = register_parameter("weight", empty({c}));
    bias = register_parameter("bias", options.bias() ? empty({c}) : Tensor(), options.bias());
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
  reset_parameters();
}

void BatchNormImplBase::reset_running_stats() {
  if (!options.track_running_stats()) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNormImplBase::reset_parameters() {
  reset_running_stats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

void BatchNormImplBase::check_input(const Tensor& input) const {
  const char* layer = name().c_str();
  detail::check_input_size(layer, input, 1, options.num_features(), "channels");
  if (const Tensor& p = weight.defined() ? weight : running_mean; p.defined())
    detail::check_like_param(layer, input, p);
}

double BatchNormImplBase::count_batch() {
  double momentum = options.momentum().value_or(0.0);
  if (is_training() && options.track_running_stats()) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    // The cumulative average needs the count on the host, as in PyTorch.
    if (!options.momentum()) momentum = 1.0 / num_batches_tracked.item<double>();
  }
  return momentum;
}

Tensor BatchNormImplBase::batch_norm_forward(const Tensor& input, bool relu, const Tensor& residual) {
  check_input(input);
  if (is_training() && sync)
    if (std::optional<Tensor> out = sync->forward(*this, input))
      return relu ? ember::relu(residual.defined() ? *out + residual : *out) : *out;
  if (is_training()) {
    EMBER_CHECK(input.numel() / input.size(1) > 1, name(),
                ": expected more than 1 value per channel when training, got input ", input.sizes());
  }
  double momentum = count_batch();
  // Batch statistics in training, and in eval when none are tracked.
  bool use_batch_stats = is_training() || !options.track_running_stats();
  if (relu)
    return batch_norm_relu(input, running_mean, running_var, weight, bias, use_batch_stats, momentum,
                           options.eps(), residual);
  return batch_norm(input, running_mean, running_var, weight, bias, use_batch_stats, momentum, options.eps());
}

Tensor BatchNormImplBase::forward_relu(const Tensor& input, const Tensor& residual) {
  return batch_norm_forward(input, true, residual);
}

std::string BatchNormImplBase::extra_repr() const {
  return str_cat(options.num_features(), ", eps=", options.eps(),
                 ", momentum=", detail::optional_str(options.momentum()),
                 ", affine=", detail::bool_str(options.affine()), ", bias=", detail::bool_str(bias.defined()),
                 ", track_running_stats=", detail::bool_str(options.track_running_stats()));
}

Tensor BatchNorm1dImpl::forward(const Tensor& input) {
  detail::check_input_dim("BatchNorm1d", input, {2, 3}, "2D or 3D");
  return batch_norm_forward(input);
}

Tensor BatchNorm2dImpl::forward(const Tensor& input) {
  detail::check_input_dim("BatchNorm2d", input, {4}, "4D");
  return batch_norm_forward(input);
}

Tensor BatchNorm3dImpl::forward(const Tensor& input) {
  detail::check_input_dim("BatchNorm3d", input, {5}, "5D");
  return batch_norm_forward(input);
}

// --- LayerNorm ---

LayerNormImpl::LayerNormImpl(const LayerNormOptions& options_) : Module("LayerNorm"), options(options_) {
  const std::vector<int64_t>& shape = options.normalized_shape();
  detail::check_normalized_shape("LayerNorm", shape);
  if (options.elementwise_affine()) {
    weight = register_parameter("weight", ember::empty(shape));
    bias = register_parameter("bias", options.bias() ? ember::empty(shape) : Tensor(), options.bias());
  }
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  detail::check_trailing_dims("LayerNorm", input, options.normalized_shape());
  if (weight.defined()) detail::check_like_param("LayerNorm", input, weight);
  return layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}

std::string LayerNormImpl::extra_repr() const {
  return str_cat(detail::tuple_str(options.normalized_shape()), ", eps=", options.eps(),
                 ", elementwise_affine=", detail::bool_str(options.elementwise_affine()),
                 ", bias=", detail::bool_str(options.bias()));
}

// --- GroupNorm ---

GroupNormImpl::GroupNormImpl(const GroupNormOptions& options_) : Module("GroupNorm"), options(options_) {
  int64_t g = options.num_groups(), c = options.num_channels();
  EMBER_CHECK(g > 0 && c > 0 && c % g == 0, "GroupNorm: num_channels (", c,
              ") must be divisible by num_groups (", g, "), both positive");
  if (options.affine()) {
    weight = register_parameter("weight", empty({c}));
    bias = register_parameter("bias", options.bias() ? empty({c}) : Tensor(), options.bias());
  }
  reset_parameters();
}

void GroupNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNormImpl::forward(const Tensor& input) {
  EMBER_CHECK(input.dim() >= 2, "GroupNorm: expected an input [N, C, *] with at least 2 dims, got ",
              input.sizes());
  detail::check_input_size("GroupNorm", input, 1, options.num_channels(), "channels");
  if (weight.defined()) detail::check_like_param("GroupNorm", input, weight);
  return group_norm(input, options.num_groups(), weight, bias, options.eps());
}

std::string GroupNormImpl::extra_repr() const {
  return str_cat(options.num_groups(), ", ", options.num_channels(), ", eps=", options.eps(),
                 ", affine=", detail::bool_str(options.affine()),
                 ", bias=", detail::bool_str(bias.defined()));
}

// --- RMSNorm ---

RMSNormImpl::RMSNormImpl(const RMSNormOptions& options_) : Module("RMSNorm"), options(options_) {
  detail::check_normalized_shape("RMSNorm", options.normalized_shape());
  if (options.elementwise_affine())
    weight = register_parameter("weight", ember::empty(options.normalized_shape()));
  reset_parameters();
}

void RMSNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}

Tensor RMSNormImpl::forward(const Tensor& input) {
  detail::check_trailing_dims("RMSNorm", input, options.normalized_shape());
  if (weight.defined()) detail::check_like_param("RMSNorm", input, weight);
  return functional::rms_norm(input, options.normalized_shape(), weight, options.eps());
}

std::string RMSNormImpl::extra_repr() const {
  return str_cat(detail::tuple_str(options.normalized_shape()), ", eps=", detail::optional_str(options.eps()),
                 ", elementwise_affine=", detail::bool_str(options.elementwise_affine()));
}

}  // namespace ember::nn
