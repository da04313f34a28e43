#include "ember/nn/pooling.h"

#include "ember/core/ops/pooling.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {

using detail::size_str;
using ember::detail::str_cat;

namespace {

// "MaxPool2d" or "MaxPool3d" from the family's prefix.
template <size_t D>
std::string layer_name(const char* family) {
  return str_cat(family, D, "d");
}

template <size_t D>
void check_pool_input(const std::string& layer, const Tensor& input) {
  const std::string expected = str_cat(D + 1, "D (unbatched) or ", D + 2, "D (batched)");
  detail::check_input_dim(layer.c_str(), input, {static_cast<int64_t>(D) + 1, static_cast<int64_t>(D) + 2},
                          expected.c_str());
}

}  // namespace

template <size_t D>
MaxPoolImpl<D>::MaxPoolImpl(const MaxPoolOptions<D>& options_)
    : Module(layer_name<D>("MaxPool")), options(options_) {}

template <size_t D>
Tensor MaxPoolImpl<D>::forward(const Tensor& input) {
  check_pool_input<D>(name(), input);
  const auto& o = options;
  if constexpr (D == 2)
    return max_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
  else
    return max_pool3d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
}

template <size_t D>
std::string MaxPoolImpl<D>::extra_repr() const {
  return str_cat("kernel_size=", size_str(options.kernel_size()), ", stride=", size_str(options.stride()),
                 ", padding=", size_str(options.padding()), ", dilation=", size_str(options.dilation()),
                 ", ceil_mode=", detail::bool_str(options.ceil_mode()));
}

std::tuple<Tensor, Tensor> MaxPool2dImpl::forward_with_indices(const Tensor& input) {
  check_pool_input<2>(name(), input);
  return max_pool2d_with_indices(input, options.kernel_size(), options.stride(), options.padding(),
                                 options.dilation(), options.ceil_mode());
}

template <size_t D>
AvgPoolImpl<D>::AvgPoolImpl(const AvgPoolOptions<D>& options_)
    : Module(layer_name<D>("AvgPool")), options(options_) {}

template <size_t D>
Tensor AvgPoolImpl<D>::forward(const Tensor& input) {
  check_pool_input<D>(name(), input);
  const auto& o = options;
  if constexpr (D == 2)
    return avg_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad(),
                      o.divisor_override());
  else
    return avg_pool3d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad(),
                      o.divisor_override());
}

template <size_t D>
std::string AvgPoolImpl<D>::extra_repr() const {
  return str_cat("kernel_size=", size_str(options.kernel_size()), ", stride=", size_str(options.stride()),
                 ", padding=", size_str(options.padding()));
}

template <size_t D>
AdaptiveAvgPoolImpl<D>::AdaptiveAvgPoolImpl(const AdaptiveAvgPoolOptions<D>& options_)
    : Module(layer_name<D>("AdaptiveAvgPool")), options(options_) {}

template <size_t D>
Tensor AdaptiveAvgPoolImpl<D>::forward(const Tensor& input) {
  check_pool_input<D>(name(), input);
  if constexpr (D == 2)
    return adaptive_avg_pool2d(input, options.output_size());
  else
    return adaptive_avg_pool3d(input, options.output_size());
}

template <size_t D>
std::string AdaptiveAvgPoolImpl<D>::extra_repr() const {
  return "output_size=" + size_str(options.output_size());
}

template class MaxPoolImpl<2>;
template class MaxPoolImpl<3>;
template class AvgPoolImpl<2>;
template class AvgPoolImpl<3>;
template class AdaptiveAvgPoolImpl<2>;
template class AdaptiveAvgPoolImpl<3>;

}  // namespace ember::nn
