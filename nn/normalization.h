#pragma once

// BatchNorm1d/2d/3d, LayerNorm, GroupNorm and RMSNorm, initialised as PyTorch's (weight ones, bias
// zeros, running_mean zeros, running_var ones).

#include <optional>
#include <vector>

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}
  EMBER_ARG(int64_t, num_features);
  EMBER_ARG(double, eps) = 1e-5;
  // Running stats r = (1 - momentum) r + momentum s; nullopt: the cumulative average
  // (momentum 1 / num_batches_tracked).
  EMBER_ARG(std::optional<double>, momentum) = 0.1;
  EMBER_ARG(bool, affine) = true;
  EMBER_ARG(bool, track_running_stats) = true;
  EMBER_ARG(bool, bias) = true;  // with affine: a learnable shift
};

// What BatchNorm1d and BatchNorm2d share; they differ in the input ranks they take. Training
// normalizes with the batch's statistics and updates the running ones (when tracked); eval uses
// the running statistics.
class BatchNormImplBase;

// What makes a BatchNorm layer's training statistics those of the whole batch across processes
// (SyncBatchNorm). distributed/ implements it over a process group, and its
// convert_sync_batchnorm sets one on every BatchNorm of a model: nn only declares it, being
// below distributed.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  // bn's training forward on `input` (checked against bn) across the processes, or nullopt for
  // bn's own (a group of one).
  virtual std::optional<Tensor> forward(BatchNormImplBase& bn, const Tensor& input) = 0;
};

class BatchNormImplBase : public Module {
 public:
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;
  // Checks input [N, C, *] against the layer: C channels, the parameters' dtype and device.
  void check_input(const Tensor& input) const;
  // Training with tracked stats: counts the batch and returns the momentum for the running stats.
  double count_batch();
  // relu(forward(input) + residual) (residual undefined for none), fused into batch_norm's
  // elementwise pass (batch_norm_relu); a synchronized layer (SyncBatchNorm) runs the three ops.
  Tensor forward_relu(const Tensor& input, const Tensor& residual = {});

  BatchNormOptions options;
  Tensor weight, bias;                  // [num_features] with affine
  Tensor running_mean, running_var;     // [num_features] with track_running_stats
  Tensor num_batches_tracked;           // int64 scalar with track_running_stats
  std::shared_ptr<BatchNormSync> sync;  // in training, the statistics' synchronization if any

 protected:
  BatchNormImplBase(std::string name, const BatchNormOptions& options);
  Tensor batch_norm_forward(const Tensor& input, bool relu = false, const Tensor& residual = {});
};

// Input [N, C] or [N, C, L].
class BatchNorm1dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& options) : BatchNormImplBase("BatchNorm1d", options) {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(BatchNorm1d);

// Input [N, C, H, W].
class BatchNorm2dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& options) : BatchNormImplBase("BatchNorm2d", options) {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(BatchNorm2d);

// Input [N, C, D, H, W].
class BatchNorm3dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm3dImpl(const BatchNormOptions& options) : BatchNormImplBase("BatchNorm3d", options) {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(BatchNorm3d);

struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  EMBER_ARG(std::vector<int64_t>, normalized_shape);
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(bool, elementwise_affine) = true;
  EMBER_ARG(bool, bias) = true;  // with elementwise_affine: a learnable shift
};

// Normalizes over the trailing dims normalized_shape.
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  LayerNormOptions options;
  Tensor weight, bias;  // normalized_shape, with elementwise_affine
};
EMBER_MODULE(LayerNorm);

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  EMBER_ARG(int64_t, num_groups);
  EMBER_ARG(int64_t, num_channels);
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(bool, affine) = true;
  EMBER_ARG(bool, bias) = true;  // with affine: a learnable shift
};

// Input [N, C, *]; normalizes each of num_groups channel groups.
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(const GroupNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  GroupNormOptions options;
  Tensor weight, bias;  // [num_channels], with affine
};
EMBER_MODULE(GroupNorm);

struct RMSNormOptions {
  RMSNormOptions(std::vector<int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  EMBER_ARG(std::vector<int64_t>, normalized_shape);
  // nullopt: the machine epsilon of the dtype the norm computes in.
  EMBER_ARG(std::optional<double>, eps) = std::nullopt;
  EMBER_ARG(bool, elementwise_affine) = true;
};

// x / sqrt(mean(x^2) + eps) over the trailing dims normalized_shape, times weight.
class RMSNormImpl : public Module {
 public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  RMSNormOptions options;
  Tensor weight;  // normalized_shape, with elementwise_affine
};
EMBER_MODULE(RMSNorm);

}  // namespace ember::nn
