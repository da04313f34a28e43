#include "ember/nn/loss.h"

#include "ember/nn/functional.h"

namespace ember::nn {
namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None:
      return "none";
    case Reduction::Sum:
      return "sum";
    case Reduction::Mean:
      break;
  }
  return "mean";
}

}  // namespace

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyLossOptions& options_)
    : Module("CrossEntropyLoss"), options(options_) {
  EMBER_CHECK(options.label_smoothing() >= 0 && options.label_smoothing() <= 1,
              "CrossEntropyLoss: label_smoothing must be between 0.0 and 1.0, got ",
              options.label_smoothing());
  weight = register_buffer("weight", options.weight());
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, options.ignore_index(), reduction_name(options.reduction()),
                       options.label_smoothing());
}

NLLLossImpl::NLLLossImpl(const NLLLossOptions& options_) : Module("NLLLoss"), options(options_) {
  weight = register_buffer("weight", options.weight());
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, options.ignore_index(), reduction_name(options.reduction()));
}

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction_name(options.reduction()));
}

Tensor L1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::l1_loss(input, target, reduction_name(options.reduction()));
}

SmoothL1LossImpl::SmoothL1LossImpl(const SmoothL1LossOptions& options_)
    : Module("SmoothL1Loss"), options(options_) {
  EMBER_CHECK(options.beta() >= 0, "SmoothL1Loss: beta must not be negative, got ", options.beta());
}

Tensor SmoothL1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::smooth_l1_loss(input, target, reduction_name(options.reduction()), options.beta());
}

BCELossImpl::BCELossImpl(const BCELossOptions& options_) : Module("BCELoss"), options(options_) {
  weight = register_buffer("weight", options.weight());
}

Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy(input, target, weight, reduction_name(options.reduction()));
}

KLDivLossImpl::KLDivLossImpl(const KLDivLossOptions& options_) : Module("KLDivLoss"), options(options_) {
  const std::string& r = options.reduction();
  EMBER_CHECK(r == "none" || r == "mean" || r == "sum" || r == "batchmean",
              "KLDivLoss: reduction must be 'none', 'mean', 'sum' or 'batchmean', got '", r, "'");
}

Tensor KLDivLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::kl_div(input, target, options.reduction(), options.log_target());
}

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options_)
    : Module("BCEWithLogitsLoss"), options(options_) {
  weight = register_buffer("weight", options.weight());
  pos_weight = register_buffer("pos_weight", options.pos_weight());
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, reduction_name(options.reduction()),
                                          pos_weight);
}

}  // namespace ember::nn
