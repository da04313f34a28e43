#include "ember/nn/layer_util.h"

#include <cmath>

#include "ember/core/autocast_mode.h"
#include "ember/nn/init.h"

namespace ember::nn::detail {

void check_input_dim(const char* layer, const Tensor& input, std::initializer_list<int64_t> dims,
                     const char* expected) {
  for (int64_t d : dims)
    if (input.dim() == d) return;
  throw Error(ember::detail::str_cat(layer, ": expected ", expected, " input, got ", input.dim(), "D input ",
                                     input.sizes()));
}

void check_input_size(const char* layer, const Tensor& input, int64_t dim, int64_t n, const char* what) {
  EMBER_CHECK(input.size(dim) == n, layer, ": input has ", input.size(dim), " ", what, ", expected ", n,
              " (input ", input.sizes(), ")");
}

void check_like_param(const char* layer, const Tensor& input, const Tensor& param) {
  // Under autocast the ops cast their inputs: a bfloat16 activation meets float32 parameters.
  EMBER_CHECK(input.dtype() == param.dtype() || amp::is_autocast_enabled(input.device().type), layer,
              ": input has dtype ", input.dtype(), " but the layer's parameters have ", param.dtype(),
              " (convert one with to())");
  EMBER_CHECK(input.device() == param.device(), layer, ": input is on ", input.device(),
              " but the layer's parameters are on ", param.device());
}

void reset_fan_in_uniform(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
  double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
  init::uniform_(bias, -bound, bound);
}

void check_trailing_dims(const char* layer, const Tensor& input, IntArrayRef shape) {
  int64_t n = static_cast<int64_t>(shape.size());
  EMBER_CHECK(
      input.dim() >= n && IntArrayRef(input.sizes().data() + input.dim() - n, shape.size()).equals(shape),
      layer, ": expected input with trailing dims ", shape, ", got input ", input.sizes());
}

void check_normalized_shape(const char* layer, IntArrayRef shape) {
  EMBER_CHECK(!shape.empty(), layer, ": normalized_shape must not be empty");
  for (int64_t s : shape)
    EMBER_CHECK(s >= 0, layer, ": normalized_shape must not hold negative sizes, got ", shape);
}

std::string tuple_str(IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + (sizes.size() == 1 ? ",)" : ")");
}

std::string size_str(IntArrayRef sizes) {
  bool equal = true;
  for (int64_t s : sizes) equal = equal && s == sizes[0];
  return equal && !sizes.empty() ? std::to_string(sizes[0]) : tuple_str(sizes);
}

std::string optional_str(std::optional<double> v) { return v ? ember::detail::str_cat(*v) : "None"; }

}  // namespace ember::nn::detail
