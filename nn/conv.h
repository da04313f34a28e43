#pragma once

// Conv1d, Conv2d, Conv3d and ConvTranspose2d, with libtorch's options:
// `Conv2d(Conv2dOptions(3, 8, 3).stride(2).padding(1).bias(false))`.

#include <string_view>

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

// A convolution's padding: sizes (`1`, `{1, 2}`) or PyTorch's strings "same" and "valid".
template <size_t D>
class ConvPadding {
 public:
  ConvPadding(int64_t p) : sizes_(p) {}
  ConvPadding(std::initializer_list<int64_t> p) : sizes_(p) {}
  ConvPadding(ExpandingArray<D> p) : sizes_(p) {}
  explicit ConvPadding(std::string_view mode) : sizes_(0), mode_(mode == "same" ? "same" : "valid") {
    EMBER_CHECK(mode == "same" || mode == "valid", "ConvPadding: invalid padding string \"", mode,
                "\", should be \"same\" or \"valid\"");
  }
  // A literal, so that `0` still means zero padding.
  template <size_t N>
  ConvPadding(const char (&mode)[N]) : ConvPadding(std::string_view(mode)) {}

  bool is_mode() const { return !mode_.empty(); }
  std::string_view mode() const { return mode_; }  // "" for explicit sizes
  const ExpandingArray<D>& sizes() const { return sizes_; }

 private:
  ExpandingArray<D> sizes_;
  std::string_view mode_;  // a literal
};

template <size_t D>
struct ConvOptions {
  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  EMBER_ARG(int64_t, in_channels);
  EMBER_ARG(int64_t, out_channels);
  EMBER_ARG(ExpandingArray<D>, kernel_size);
  EMBER_ARG(ExpandingArray<D>, stride) = 1;
  EMBER_ARG(ConvPadding<D>, padding) = 0;
  EMBER_ARG(ExpandingArray<D>, dilation) = 1;
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using Conv3dOptions = ConvOptions<3>;

// Input [N, C_in, *spatial] or unbatched [C_in, *spatial]; weight [C_out, C_in / groups, *kernel].
template <size_t D>
class ConvNdImpl : public Module {
 public:
  ConvNdImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : ConvNdImpl(ConvOptions<D>(in_channels, out_channels, kernel_size)) {}
  explicit ConvNdImpl(const ConvOptions<D>& options);
  // PyTorch's default: weight ~ kaiming_uniform(a = sqrt(5)), bias ~ U(+-1/sqrt(fan_in)).
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  ConvOptions<D> options;
  Tensor weight;
  Tensor bias;  // [C_out]; undefined without bias
};
extern template class ConvNdImpl<1>;
extern template class ConvNdImpl<2>;
extern template class ConvNdImpl<3>;

class Conv1dImpl : public ConvNdImpl<1> {
 public:
  using ConvNdImpl<1>::ConvNdImpl;
};
EMBER_MODULE(Conv1d);

class Conv2dImpl : public ConvNdImpl<2> {
 public:
  using ConvNdImpl<2>::ConvNdImpl;
};
EMBER_MODULE(Conv2d);

// Input [N, C_in, D, H, W]: video clips, volumes.
class Conv3dImpl : public ConvNdImpl<3> {
 public:
  using ConvNdImpl<3>::ConvNdImpl;
};
EMBER_MODULE(Conv3d);

template <size_t D>
struct ConvTransposeOptions {
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  EMBER_ARG(int64_t, in_channels);
  EMBER_ARG(int64_t, out_channels);
  EMBER_ARG(ExpandingArray<D>, kernel_size);
  EMBER_ARG(ExpandingArray<D>, stride) = 1;
  EMBER_ARG(ExpandingArray<D>, padding) = 0;
  EMBER_ARG(ExpandingArray<D>, output_padding) = 0;
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
  EMBER_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose2dOptions = ConvTransposeOptions<2>;

// The adjoint of Conv2d; weight [C_in, C_out / groups, kH, kW].
class ConvTranspose2dImpl : public Module {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options);
  void reset_parameters();
  // output_size ([H, W] or [N, C, H, W]), when given, picks the output_padding that reaches it
  // (a stride > 1 leaves several output sizes possible).
  Tensor forward(const Tensor& input, IntArrayRef output_size = {});
  std::string extra_repr() const override;

  ConvTranspose2dOptions options;
  Tensor weight;
  Tensor bias;
};
EMBER_MODULE(ConvTranspose2d);

}  // namespace ember::nn
