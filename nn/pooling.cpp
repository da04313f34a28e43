#include "ember/nn/pooling.h"

#include "ember/core/ops/pooling.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {

using detail::size_str;
using ember::detail::str_cat;

namespace {
void check_pool_input(const char* layer, const Tensor& input) {
  detail::check_input_dim(layer, input, {3, 4}, "3D (unbatched) or 4D (batched)");
}
}  // namespace

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  check_pool_input("MaxPool2d", input);
  return max_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.dilation(),
                    options.ceil_mode());
}

std::tuple<Tensor, Tensor> MaxPool2dImpl::forward_with_indices(const Tensor& input) {
  check_pool_input("MaxPool2d", input);
  return max_pool2d_with_indices(input, options.kernel_size(), options.stride(), options.padding(),
                                 options.dilation(), options.ceil_mode());
}

std::string MaxPool2dImpl::extra_repr() const {
  return str_cat("kernel_size=", size_str(options.kernel_size()), ", stride=", size_str(options.stride()),
                 ", padding=", size_str(options.padding()), ", dilation=", size_str(options.dilation()),
                 ", ceil_mode=", detail::bool_str(options.ceil_mode()));
}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  check_pool_input("AvgPool2d", input);
  return avg_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.ceil_mode(),
                    options.count_include_pad(), options.divisor_override());
}

std::string AvgPool2dImpl::extra_repr() const {
  return str_cat("kernel_size=", size_str(options.kernel_size()), ", stride=", size_str(options.stride()),
                 ", padding=", size_str(options.padding()));
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) {
  check_pool_input("AdaptiveAvgPool2d", input);
  return adaptive_avg_pool2d(input, options.output_size());
}

std::string AdaptiveAvgPool2dImpl::extra_repr() const {
  return "output_size=" + size_str(options.output_size());
}

}  // namespace ember::nn
