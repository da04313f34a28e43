#pragma once

// MaxPool2d, AvgPool2d and AdaptiveAvgPool2d on [N, C, H, W] or unbatched [C, H, W] inputs, and
// their 3D forms on [N, C, D, H, W] or [C, D, H, W].

#include <optional>
#include <tuple>

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

template <size_t D>
struct MaxPoolOptions {
  // stride defaults to kernel_size.
  MaxPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}
  EMBER_ARG(ExpandingArray<D>, kernel_size);
  EMBER_ARG(ExpandingArray<D>, stride);
  EMBER_ARG(ExpandingArray<D>, padding) = 0;
  EMBER_ARG(ExpandingArray<D>, dilation) = 1;
  EMBER_ARG(bool, ceil_mode) = false;
};
using MaxPool2dOptions = MaxPoolOptions<2>;
using MaxPool3dOptions = MaxPoolOptions<3>;

template <size_t D>
class MaxPoolImpl : public Module {
 public:
  explicit MaxPoolImpl(const MaxPoolOptions<D>& options);
  explicit MaxPoolImpl(ExpandingArray<D> kernel_size) : MaxPoolImpl(MaxPoolOptions<D>(kernel_size)) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  MaxPoolOptions<D> options;
};
extern template class MaxPoolImpl<2>;
extern template class MaxPoolImpl<3>;

class MaxPool2dImpl : public MaxPoolImpl<2> {
 public:
  using MaxPoolImpl<2>::MaxPoolImpl;
  // (values, int64 indices of each maximum within its input plane).
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
};
EMBER_MODULE(MaxPool2d);

class MaxPool3dImpl : public MaxPoolImpl<3> {
 public:
  using MaxPoolImpl<3>::MaxPoolImpl;
};
EMBER_MODULE(MaxPool3d);

template <size_t D>
struct AvgPoolOptions {
  // stride defaults to kernel_size.
  AvgPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}
  EMBER_ARG(ExpandingArray<D>, kernel_size);
  EMBER_ARG(ExpandingArray<D>, stride);
  EMBER_ARG(ExpandingArray<D>, padding) = 0;
  EMBER_ARG(bool, ceil_mode) = false;
  EMBER_ARG(bool, count_include_pad) = true;
  EMBER_ARG(std::optional<int64_t>, divisor_override) = std::nullopt;
};
using AvgPool2dOptions = AvgPoolOptions<2>;
using AvgPool3dOptions = AvgPoolOptions<3>;

template <size_t D>
class AvgPoolImpl : public Module {
 public:
  explicit AvgPoolImpl(const AvgPoolOptions<D>& options);
  explicit AvgPoolImpl(ExpandingArray<D> kernel_size) : AvgPoolImpl(AvgPoolOptions<D>(kernel_size)) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  AvgPoolOptions<D> options;
};
extern template class AvgPoolImpl<2>;
extern template class AvgPoolImpl<3>;

class AvgPool2dImpl : public AvgPoolImpl<2> {
 public:
  using AvgPoolImpl<2>::AvgPoolImpl;
};
EMBER_MODULE(AvgPool2d);

class AvgPool3dImpl : public AvgPoolImpl<3> {
 public:
  using AvgPoolImpl<3>::AvgPoolImpl;
};
EMBER_MODULE(AvgPool3d);

template <size_t D>
struct AdaptiveAvgPoolOptions {
  AdaptiveAvgPoolOptions(ExpandingArray<D> output_size) : output_size_(output_size) {}
  EMBER_ARG(ExpandingArray<D>, output_size);
};
using AdaptiveAvgPool2dOptions = AdaptiveAvgPoolOptions<2>;
using AdaptiveAvgPool3dOptions = AdaptiveAvgPoolOptions<3>;

template <size_t D>
class AdaptiveAvgPoolImpl : public Module {
 public:
  explicit AdaptiveAvgPoolImpl(const AdaptiveAvgPoolOptions<D>& options);
  explicit AdaptiveAvgPoolImpl(ExpandingArray<D> output_size)
      : AdaptiveAvgPoolImpl(AdaptiveAvgPoolOptions<D>(output_size)) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  AdaptiveAvgPoolOptions<D> options;
};
extern template class AdaptiveAvgPoolImpl<2>;
extern template class AdaptiveAvgPoolImpl<3>;

class AdaptiveAvgPool2dImpl : public AdaptiveAvgPoolImpl<2> {
 public:
  using AdaptiveAvgPoolImpl<2>::AdaptiveAvgPoolImpl;
};
EMBER_MODULE(AdaptiveAvgPool2d);

class AdaptiveAvgPool3dImpl : public AdaptiveAvgPoolImpl<3> {
 public:
  using AdaptiveAvgPoolImpl<3>::AdaptiveAvgPoolImpl;
};
EMBER_MODULE(AdaptiveAvgPool3d);

}  // namespace ember::nn
