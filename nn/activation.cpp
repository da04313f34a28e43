#include "ember/nn/activation.h"

#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/softmax.h"
#include "ember/nn/functional.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return options.inplace() ? input.relu_() : relu(input); }

std::string ReLUImpl::extra_repr() const { return options.inplace() ? "inplace=true" : ""; }

Tensor ReLU6Impl::forward(const Tensor& input) { return functional::relu6(input); }

Tensor LeakyReLUImpl::forward(const Tensor& input) { return leaky_relu(input, options.negative_slope()); }

std::string LeakyReLUImpl::extra_repr() const {
  return ember::detail::str_cat("negative_slope=", options.negative_slope());
}

Tensor HardswishImpl::forward(const Tensor& input) { return functional::hardswish(input); }

GELUImpl::GELUImpl(const GELUOptions& options_) : Module("GELU"), options(options_) {
  EMBER_CHECK(options.approximate() == "none" || options.approximate() == "tanh",
              "GELU: approximate must be \"none\" or \"tanh\", got \"", options.approximate(), "\"");
}

Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, options.approximate()); }

std::string GELUImpl::extra_repr() const { return "approximate='" + options.approximate() + "'"; }

Tensor SiLUImpl::forward(const Tensor& input) { return silu(input); }
Tensor TanhImpl::forward(const Tensor& input) { return tanh(input); }
Tensor SigmoidImpl::forward(const Tensor& input) { return sigmoid(input); }

Tensor SoftmaxImpl::forward(const Tensor& input) { return softmax(input, options.dim()); }

std::string SoftmaxImpl::extra_repr() const { return ember::detail::str_cat("dim=", options.dim()); }

}  // namespace ember::nn
