#pragma once

// Losses as modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, BCELoss,
// BCEWithLogitsLoss and KLDivLoss, each forward(input, target). Class weights are buffers, as in
// PyTorch.

#include <string>

#include "ember/core/ops/loss.h"
#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

// How a loss reduces over elements, as libtorch's torch::kMean.
using ember::Reduction;
inline constexpr Reduction kNone = Reduction::None;
inline constexpr Reduction kMean = Reduction::Mean;
inline constexpr Reduction kSum = Reduction::Sum;

struct CrossEntropyLossOptions {
  EMBER_ARG(Tensor, weight);  // [C] class weights, or undefined
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = kMean;
  EMBER_ARG(double, label_smoothing) = 0.0;
};

// input [N, C] (or [C], [N, C, d...]) logits; target class indices or probabilities.
class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  CrossEntropyLossOptions options;
  Tensor weight;
};
EMBER_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  EMBER_ARG(Tensor, weight);  // [C] class weights, or undefined
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = kMean;
};

// input log-probabilities [N, C] (or [C], [N, C, d...]); target class indices.
class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  NLLLossOptions options;
  Tensor weight;
};
EMBER_MODULE(NLLLoss);

struct MSELossOptions {
  MSELossOptions(Reduction reduction = kMean) : reduction_(reduction) {}
  EMBER_ARG(Reduction, reduction);
};

class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(const MSELossOptions& options = {}) : Module("MSELoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);

  MSELossOptions options;
};
EMBER_MODULE(MSELoss);

struct L1LossOptions {
  L1LossOptions(Reduction reduction = kMean) : reduction_(reduction) {}
  EMBER_ARG(Reduction, reduction);
};

class L1LossImpl : public Module {
 public:
  explicit L1LossImpl(const L1LossOptions& options = {}) : Module("L1Loss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);

  L1LossOptions options;
};
EMBER_MODULE(L1Loss);

struct SmoothL1LossOptions {
  EMBER_ARG(Reduction, reduction) = kMean;
  EMBER_ARG(double, beta) = 1.0;  // quadratic below beta, linear above
};

class SmoothL1LossImpl : public Module {
 public:
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  SmoothL1LossOptions options;
};
EMBER_MODULE(SmoothL1Loss);

struct BCELossOptions {
  EMBER_ARG(Tensor, weight);  // broadcast to the input, or undefined
  EMBER_ARG(Reduction, reduction) = kMean;
};

// Binary cross-entropy of probabilities (functional::binary_cross_entropy).
class BCELossImpl : public Module {
 public:
  explicit BCELossImpl(const BCELossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  BCELossOptions options;
  Tensor weight;
};
EMBER_MODULE(BCELoss);

struct KLDivLossOptions {
  EMBER_ARG(std::string, reduction) = "mean";  // "none", "mean", "sum" or "batchmean"
  EMBER_ARG(bool, log_target) = false;
};

// KL divergence of log-probabilities from a target (functional::kl_div).
class KLDivLossImpl : public Module {
 public:
  explicit KLDivLossImpl(const KLDivLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  KLDivLossOptions options;
};
EMBER_MODULE(KLDivLoss);

struct BCEWithLogitsLossOptions {
  EMBER_ARG(Tensor, weight);  // broadcast to the input, or undefined
  EMBER_ARG(Reduction, reduction) = kMean;
  EMBER_ARG(Tensor, pos_weight);  // per class (the last dim), or undefined
};

class BCEWithLogitsLossImpl : public Module {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);

  BCEWithLogitsLossOptions options;
  Tensor weight, pos_weight;
};
EMBER_MODULE(BCEWithLogitsLoss);

}  // namespace ember::nn
