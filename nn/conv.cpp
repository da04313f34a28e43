#include "ember/nn/conv.h"

#include "ember/core/factories.h"
#include "ember/core/ops/convolution.h"
#include "ember/nn/layer_util.h"

namespace ember::nn {
namespace {

void check_channels(const char* layer, int64_t in_channels, int64_t out_channels, int64_t groups) {
  EMBER_CHECK(groups > 0, layer, ": groups must be a positive integer, got ", groups);
  EMBER_CHECK(in_channels > 0 && out_channels > 0, layer,
              ": in_channels and out_channels must be positive, got ", in_channels, " and ", out_channels);
  EMBER_CHECK(in_channels % groups == 0, layer, ": in_channels (", in_channels,
              ") must be divisible by groups (", groups, ")");
  EMBER_CHECK(out_channels % groups == 0, layer, ": out_channels (", out_channels,
              ") must be divisible by groups (", groups, ")");
}

template <size_t D>
void check_positive(const char* layer, const char* what, const ExpandingArray<D>& sizes, int64_t min = 1) {
  for (size_t i = 0; i < D; ++i)
    EMBER_CHECK(sizes[i] >= min, layer, ": ", what, " must be ", min ? "positive" : "non-negative", ", got ",
                sizes);
}

// [N, C, *spatial] or unbatched [C, *spatial] with C = in_channels, like the weight.
void check_conv_input(const char* layer, const Tensor& input, int64_t spatial, int64_t in_channels,
                      const Tensor& weight) {
  std::string expected = ember::detail::str_cat(spatial + 1, "D (unbatched) or ", spatial + 2, "D (batched)");
  detail::check_input_dim(layer, input, {spatial + 1, spatial + 2}, expected.c_str());
  detail::check_input_size(layer, input, input.dim() == spatial + 2 ? 1 : 0, in_channels, "channels");
  detail::check_like_param(layer, input, weight);
}

// ", name=(a, b)" unless every size is `skip`.
template <size_t D>
std::string optional_sizes(const char* name, const ExpandingArray<D>& sizes, int64_t skip) {
  return sizes.all(skip) ? "" : ember::detail::str_cat(", ", name, "=", sizes);
}

// The layer's name by its spatial dims.
template <size_t D>
constexpr const char* conv_layer_name() {
  return D == 1 ? "Conv1d" : D == 2 ? "Conv2d" : "Conv3d";
}

}  // namespace

template <size_t D>
ConvNdImpl<D>::ConvNdImpl(const ConvOptions<D>& options_) : Module(conv_layer_name<D>()), options(options_) {
  const char* layer = conv_layer_name<D>();
  check_channels(layer, options.in_channels(), options.out_channels(), options.groups());
  check_positive(layer, "kernel_size", options.kernel_size());
  check_positive(layer, "stride", options.stride());
  check_positive(layer, "dilation", options.dilation());
  check_positive(layer, "padding", options.padding().sizes(), 0);
  EMBER_CHECK(options.padding().mode() != "same" || options.stride().all(1), layer,
              ": padding=\"same\" is not supported for strided convolutions (stride ", options.stride(), ")");
  DimVector shape{options.out_channels(), options.in_channels() / options.groups()};
  for (size_t i = 0; i < D; ++i) shape.push_back(options.kernel_size()[i]);
  weight = register_parameter("weight", empty(shape));
  bias =
      register_parameter("bias", options.bias() ? empty({options.out_channels()}) : Tensor(), options.bias());
  reset_parameters();
}

template <size_t D>
void ConvNdImpl<D>::reset_parameters() {
  detail::reset_fan_in_uniform(weight, bias);
}

template <size_t D>
Tensor ConvNdImpl<D>::forward(const Tensor& input) {
  check_conv_input(name().c_str(), input, D, options.in_channels(), weight);
  auto run = [&](auto padding) {
    if constexpr (D == 1)
      return conv1d(input, weight, bias, options.stride(), padding, options.dilation(), options.groups());
    else if constexpr (D == 2)
      return conv2d(input, weight, bias, options.stride(), padding, options.dilation(), options.groups());
    else
      return conv3d(input, weight, bias, options.stride(), padding, options.dilation(), options.groups());
  };
  const ConvPadding<D>& p = options.padding();
  return p.is_mode() ? run(PaddingMode(p.mode())) : run(IntArrayRef(p.sizes()));
}

template <size_t D>
std::string ConvNdImpl<D>::extra_repr() const {
  const ConvPadding<D>& p = options.padding();
  std::string padding =
      p.is_mode() ? ember::detail::str_cat(", padding=", p.mode()) : optional_sizes("padding", p.sizes(), 0);
  return ember::detail::str_cat(
      options.in_channels(), ", ", options.out_channels(), ", kernel_size=", options.kernel_size(),
      ", stride=", options.stride(), padding, optional_sizes("dilation", options.dilation(), 1),
      options.groups() != 1 ? ember::detail::str_cat(", groups=", options.groups()) : "",
      options.bias() ? "" : ", bias=false");
}

template class ConvNdImpl<1>;
template class ConvNdImpl<2>;
template class ConvNdImpl<3>;

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& options_)
    : Module("ConvTranspose2d"), options(options_) {
  const char* layer = "ConvTranspose2d";
  check_channels(layer, options.in_channels(), options.out_channels(), options.groups());
  check_positive(layer, "kernel_size", options.kernel_size());
  check_positive(layer, "stride", options.stride());
  check_positive(layer, "dilation", options.dilation());
  check_positive(layer, "padding", options.padding(), 0);
  check_positive(layer, "output_padding", options.output_padding(), 0);
  weight =
      register_parameter("weight", empty({options.in_channels(), options.out_channels() / options.groups(),
                                          options.kernel_size()[0], options.kernel_size()[1]}));
  bias =
      register_parameter("bias", options.bias() ? empty({options.out_channels()}) : Tensor(), options.bias());
  reset_parameters();
}

void ConvTranspose2dImpl::reset_parameters() { detail::reset_fan_in_uniform(weight, bias); }

Tensor ConvTranspose2dImpl::forward(const Tensor& input, IntArrayRef output_size) {
  const char* layer = "ConvTranspose2d";
  check_conv_input(layer, input, 2, options.in_channels(), weight);
  DimVector output_padding(IntArrayRef(options.output_padding()));
  if (!output_size.empty()) {
    int64_t batch = input.dim() - 3;  // 1 when batched
    EMBER_CHECK(output_size.size() == 2 || output_size.size() == static_cast<size_t>(input.dim()), layer,
                ": for ", input.dim(), "D input, output_size must have 2 or ", input.dim(), " elements, got ",
                output_size);
    IntArrayRef spatial(output_size.end() - 2, 2);
    int64_t min_sizes[2], max_sizes[2];
    for (int64_t d = 0; d < 2; ++d) {
      min_sizes[d] = (input.size(batch + 1 + d) - 1) * options.stride()[d] - 2 * options.padding()[d] +
                     options.dilation()[d] * (options.kernel_size()[d] - 1) + 1;
      max_sizes[d] = min_sizes[d] + options.stride()[d] - 1;
    }
    for (int64_t d = 0; d < 2; ++d) {
      EMBER_CHECK(spatial[d] >= min_sizes[d] && spatial[d] <= max_sizes[d], layer,
                  ": requested an output size of ", spatial, ", but valid sizes range from ",
                  IntArrayRef(min_sizes, 2), " to ", IntArrayRef(max_sizes, 2), " (for an input of ",
                  input.sizes(), ")");
      output_padding[d] = spatial[d] - min_sizes[d];
    }
  }
  return conv_transpose2d(input, weight, bias, options.stride(), options.padding(), output_padding,
                          options.groups(), options.dilation());
}

std::string ConvTranspose2dImpl::extra_repr() const {
  return ember::detail::str_cat(
      options.in_channels(), ", ", options.out_channels(), ", kernel_size=", options.kernel_size(),
      ", stride=", options.stride(), optional_sizes("padding", options.padding(), 0),
      optional_sizes("dilation", options.dilation(), 1),
      optional_sizes("output_padding", options.output_padding(), 0),
      options.groups() != 1 ? ember::detail::str_cat(", groups=", options.groups()) : "",
      options.bias() ? "" : ", bias=false");
}

}  // namespace ember::nn
