#include "ember/nn/linear.h"

#include "ember/core/factories.h"
#include "ember/nn/functional.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {

LinearImpl::LinearImpl(const LinearOptions& options_) : Module("Linear"), options(options_) {
  EMBER_CHECK(options.in_features() >= 0 && options.out_features() >= 0,
              "Linear: in_features and out_features must not be negative, got ", options.in_features(),
              " and ", options.out_features());
  weight = register_parameter("weight", empty({options.out_features(), options.in_features()}));
  bias =
      register_parameter("bias", options.bias() ? empty({options.out_features()}) : Tensor(), options.bias());
  reset_parameters();
}

void LinearImpl::reset_parameters() { detail::reset_fan_in_uniform(weight, bias); }

Tensor LinearImpl::forward(const Tensor& input) {
  EMBER_CHECK(input.dim() >= 1, "Linear: expected an input with at least 1 dim, got a 0-dim tensor");
  detail::check_input_size("Linear", input, -1, options.in_features(), "features");
  detail::check_like_param("Linear", input, weight);
  return functional::linear(input, weight, bias);
}

std::string LinearImpl::extra_repr() const {
  return ember::detail::str_cat("in_features=", options.in_features(),
                                ", out_features=", options.out_features(),
                                ", bias=", detail::bool_str(options.bias()));
}

std::string FlattenImpl::extra_repr() const {
  return ember::detail::str_cat("start_dim=", options.start_dim(), ", end_dim=", options.end_dim());
}

}  // namespace ember::nn
