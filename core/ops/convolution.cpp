// Frontends of the convolutions: argument checks with PyTorch's rules, output shapes, then the
// 2D kernels (conv1d runs as a conv2d of height 1, conv3d as one over its depth planes; unbatched
// inputs get a batch of one), and their backward.
#include "ember/core/ops/convolution.h"

#include <sstream>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<Conv2dFn> conv2d_stub("conv2d");
constinit DispatchStub<Conv2dFn> conv_transpose2d_stub("conv_transpose2d");
constinit DispatchStub<Conv2dWeightFn> conv2d_weight_stub("conv2d_weight");

namespace {

constexpr auto LOWER = AutocastPolicy::LowerPrecision;

const OpRegistrar registrar({
    {"conv1d", LOWER, true},
    {"conv2d", LOWER, true},
    {"conv3d", LOWER, true},
    {"conv_transpose2d", LOWER, true},
});

// One call's size arguments, one value per spatial dim.
struct ConvArgs {
  DimVector stride, pad_begin, pad_end, dilation, output_padding;
  int64_t groups;
};

DimVector per_dim(const char* op, const char* what, IntArrayRef v, int64_t dims) {
  EMBER_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == dims, op, ": expected ", what,
              " to have 1 or ", dims, " elements, but got ", v);
  return v.size() == 1 ? DimVector(dims, v[0]) : DimVector(v);
}

ConvArgs make_args(const char* op, int64_t dims, IntArrayRef stride, IntArrayRef padding,
                   IntArrayRef dilation, IntArrayRef output_padding, int64_t groups) {
  DimVector pad = per_dim(op, "padding", padding, dims);
  return {per_dim(op, "stride", stride, dims),
          pad,
          pad,
          per_dim(op, "dilation", dilation, dims),
          per_dim(op, "output_padding", output_padding, dims),
          groups};
}

// "4 x 4": a spatial size as PyTorch's conv errors print it.
std::string spatial(IntArrayRef sizes) {
  std::ostringstream os;
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? " x " : "") << sizes[i];
  return os.str();
}

void check_tensors(const char* op, int64_t dims, const Tensor& input, const Tensor& weight,
                   const Tensor& bias) {
  EMBER_CHECK(input.dim() == dims + 1 || input.dim() == dims + 2, op, ": expected ", dims + 1,
              "D (unbatched) or ", dims + 2, "D (batched) input, but got input of size ", input.sizes());
  EMBER_CHECK(weight.dim() == dims + 2, op, ": expected weight to be ", dims + 2,
              "D, but got weight of size ", weight.sizes());
  EMBER_CHECK(is_floating_point(input.dtype()), op, ": expected a floating point input, but got ",
              input.dtype());
  EMBER_CHECK(input.dtype() == weight.dtype(), op, ": input type (", input.dtype(), ") and weight type (",
              weight.dtype(), ") should be the same");
  EMBER_CHECK(input.device() == weight.device(), op,
              ": expected all tensors to be on the same device, but found ", input.device(), " and ",
              weight.device());
  if (bias.defined()) {
    EMBER_CHECK(bias.dtype() == input.dtype(), op, ": input type (", input.dtype(), ") and bias type (",
                bias.dtype(), ") should be the same");
    EMBER_CHECK(bias.device() == input.device(), op,
                ": expected all tensors to be on the same device, but found ", input.device(), " and ",
                bias.device());
  }
  for (int64_t d = 2; d < weight.dim(); ++d)
    EMBER_CHECK(weight.size(d) > 0, op, ": expected a non-empty kernel, but got weight of size ",
                weight.sizes());
}

void check_args(const char* op, bool transposed, const ConvArgs& a) {
  EMBER_CHECK(a.groups > 0, op, ": non-positive groups is not supported, got ", a.groups);
  for (size_t d = 0; d < a.stride.size(); ++d) {
    EMBER_CHECK(a.stride[d] > 0, op, ": non-positive stride is not supported, got ", IntArrayRef(a.stride));
    EMBER_CHECK(a.pad_begin[d] >= 0 && a.pad_end[d] >= 0, op, ": negative padding is not supported, got ",
                IntArrayRef(a.pad_begin));
    EMBER_CHECK(a.dilation[d] > 0, op, ": dilation should be greater than zero, got ",
                IntArrayRef(a.dilation));
    EMBER_CHECK(a.output_padding[d] >= 0, op, ": negative output_padding is not supported, got ",
                IntArrayRef(a.output_padding));
    EMBER_CHECK(!transposed || a.output_padding[d] < std::max(a.stride[d], a.dilation[d]), op,
                ": output padding must be smaller than either stride or dilation, but got ",
                "output_padding ", IntArrayRef(a.output_padding), ", stride ", IntArrayRef(a.stride),
                ", dilation ", IntArrayRef(a.dilation));
  }
}

// Channel counts: conv weight [C_out, C_in / g, k...], transposed [C_in, C_out / g, k...].
int64_t out_channels(const char* op, bool transposed, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, int64_t groups) {
  const int64_t cin = x.size(1);
  int64_t cout;
  if (transposed) {
    EMBER_CHECK(weight.size(0) == cin, op, ": given weight of size ", weight.sizes(), ", expected input ",
                x.sizes(), " to have ", weight.size(0), " channels, but got ", cin, " channels instead");
    EMBER_CHECK(cin % groups == 0, op, ": expected input channels (", cin, ") to be divisible by groups (",
                groups, ")");
    cout = weight.size(1) * groups;
  } else {
    EMBER_CHECK(weight.size(0) % groups == 0, op, ": expected weight's output channels (", weight.size(0),
                ") to be divisible by groups (", groups, ")");
    EMBER_CHECK(weight.size(1) * groups == cin, op, ": given groups=", groups, ", weight of size ",
                weight.sizes(), ", expected input ", x.sizes(), " to have ", weight.size(1) * groups,
                " channels, but got ", cin, " channels instead");
    cout = weight.size(0);
  }
  EMBER_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == cout), op, ": expected bias of size [",
              cout, "], but got ", bias.sizes());
  return cout;
}

// x batched [N, C, spatial...]; returns the output's spatial sizes.
DimVector out_spatial(const char* op, bool transposed, const Tensor& x, const Tensor& weight,
                      const ConvArgs& a) {
  const int64_t dims = x.dim() - 2;
  DimVector in(dims), padded(dims), kernel(dims), out(dims);
  for (int64_t d = 0; d < dims; ++d) {
    // Huge paddings, dilations or strides must not wrap around (shape.h's checked arithmetic).
    in[d] = x.size(d + 2);
    const int64_t pads = checked_add(op, a.pad_begin[d], a.pad_end[d]);
    padded[d] = checked_add(op, in[d], pads);
    kernel[d] = checked_add(op, checked_mul(op, a.dilation[d], weight.size(d + 2) - 1), 1);
    out[d] = transposed ? checked_add(op, checked_add(op, checked_mul(op, in[d] - 1, a.stride[d]), -pads),
                                      checked_add(op, kernel[d], a.output_padding[d]))
                        : (padded[d] - kernel[d]) / a.stride[d] + 1;
  }
  for (int64_t d = 0; d < dims; ++d) {
    if (transposed)
      EMBER_CHECK(in[d] > 0 && out[d] > 0, op, ": given input size per channel (", spatial(in),
                  "), the calculated output size per channel (", spatial(out), ") is too small");
    else
      EMBER_CHECK(padded[d] >= kernel[d], op, ": calculated padded input size per channel: (",
                  spatial(padded), "); kernel size: (", spatial(kernel),
                  "); kernel size can't be greater than actual input size");
  }
  return out;
}

// The memory format a 2D kernel runs in, on either device: channels-last when an input's strides
// suggest it (PyTorch's rule).
MemoryFormat conv_format(const Tensor& a, const Tensor& b) {
  const bool nhwc = a.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                    b.suggest_memory_format() == MemoryFormat::ChannelsLast;
  return nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

// The 2D kernels as a differentiable op: p.padding is added before the input, and the output's
// spatial size (oh, ow) fixes what is added after. x [N, C, H, W] and w are 4D. The backward is
// made of this op and conv_weight_grad, whose backward is this op again, so it can be
// differentiated again.
Tensor run_conv(bool transposed, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                int64_t oh, int64_t ow);

// The gradient of conv2d(x, weight) with respect to a weight of spatial size kh x kw, given the
// output's gradient gy. Bilinear in (x, gy): <c, conv_weight_grad(x, gy)> = <conv2d(x, c), gy>.
Tensor conv_weight_grad(const Tensor& x, const Tensor& gy, const Conv2dParams& p, int64_t kh, int64_t kw) {
  const MemoryFormat f = conv_format(x, gy);
  Tensor out = empty({gy.size(1), x.size(1) / p.groups, kh, kw}, x.options().memory_format(f));
  if (out.numel() > 0) {
    NoGradGuard no_grad;
    conv2d_weight_stub(x.device())(out, x.contiguous(f), gy.contiguous(f), p);
  }
  if (needs_grad({x, gy})) {
    SavedTensor sx(gy.requires_grad() ? x : Tensor(), false);
    SavedTensor sgy(x.requires_grad() ? gy : Tensor(), false);
    const int64_t h = x.size(2), w = x.size(3), ho = gy.size(2), wo = gy.size(3);
    record("conv2d", {x, gy}, {out}, [=](const GradContext& g) -> std::vector<Tensor> {
      const Tensor& c = g.grad();
      return {g.needs(0) ? run_conv(true, g(sgy), c, Tensor(), p, h, w) : Tensor(),
              g.needs(1) ? run_conv(false, g(sx), c, Tensor(), p, ho, wo) : Tensor()};
    });
  }
  return out;
}

Tensor run_conv(bool transposed, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                int64_t oh, int64_t ow) {
  const int64_t cout = transposed ? w.size(1) * p.groups : w.size(0);
  const MemoryFormat f = conv_format(x, w);
  Tensor out = empty({x.size(0), cout, oh, ow}, x.options().memory_format(f));
  if (out.numel() > 0) {
    NoGradGuard no_grad;  // format copies are internal
    const DispatchStub<Conv2dFn>& stub = transposed ? conv_transpose2d_stub : conv2d_stub;
    stub(x.device())(out, x.contiguous(f), w.contiguous(f), bias.defined() ? bias.contiguous() : bias, p);
  }
  if (needs_grad({x, w, bias})) {
    // x is needed only for the weight's gradient, w only for the input's.
    SavedTensor sx(w.requires_grad() ? x : Tensor(), false);
    SavedTensor sw(x.requires_grad() ? w : Tensor(), false);
    const int64_t h = x.size(2), wd = x.size(3), kh = w.size(2), kw = w.size(3);
    record(transposed ? "conv_transpose2d" : "conv2d", {x, w, bias}, {out},
           [=](const GradContext& g) -> std::vector<Tensor> {
             const Tensor& gy = g.grad();
             Tensor gx, gw, gb;
             if (g.needs(0)) gx = run_conv(!transposed, gy, g(sw), Tensor(), p, h, wd);
             // A transposed convolution's weight is that of the direct one from its output to
             // its input.
             if (g.needs(1))
               gw = transposed ? conv_weight_grad(gy, g(sx), p, kh, kw)
                               : conv_weight_grad(g(sx), gy, p, kh, kw);
             if (g.needs(2)) gb = gy.sum({0, 2, 3});
             return {gx, gw, gb};
           });
  }
  return out;
}

// A 3D convolution as one 2D convolution (the 2D kernels: cuDNN's on the GPU) over N x D_out
// images: each output depth's image holds, as channels, the kD input planes its kernel taps see
// (at depth od * stride + t * dilation, after the depth padding), in each group's order (tap, then
// channel), and the weight's taps become channels alike. The sum over the taps then accumulates
// inside the kernel, in float32 for f16 and bf16, and rounds once. The input is copied kD times.
// Differentiable as its parts are. x is batched [N, C, D, H, W].
Tensor conv3d_by_depth_taps(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvArgs& a,
                            int64_t cout, IntArrayRef spatial_out) {
  const int64_t n = x.size(0), c = x.size(1), d_out = spatial_out[0], kd = weight.size(2), g = a.groups;
  const Conv2dParams p{
      {a.stride[1], a.stride[2]}, {a.pad_begin[1], a.pad_begin[2]}, {a.dilation[1], a.dilation[2]}, g};
  const Tensor padded =
      a.pad_begin[0] + a.pad_end[0] > 0 ? pad(x, {0, 0, 0, 0, a.pad_begin[0], a.pad_end[0]}) : x;
  const int64_t h = x.size(3), w = x.size(4);
  std::vector<Tensor> taps;  // views [N, D_out, groups, C / groups, H, W]
  for (int64_t t = 0; t < kd; ++t) {
    const int64_t first = t * a.dilation[0];
    taps.push_back(padded.slice(2, first, first + (d_out - 1) * a.stride[0] + 1, a.stride[0])
                       .transpose(1, 2)
                       .view({n, d_out, g, c / g, h, w}));
  }
  // The one copy: stacked as [N, D_out, groups, kD, C / groups, H, W], each group's taps together.
  const Tensor images = stack(taps, 3).view({n * d_out, c * kd, h, w});
  const Tensor w2 =
      weight.permute({0, 2, 1, 3, 4}).reshape({cout, kd * (c / g), weight.size(3), weight.size(4)});
  const Tensor y = run_conv(false, images, w2, bias, p, spatial_out[1], spatial_out[2]);
  return y.view({n, d_out, cout, spatial_out[1], spatial_out[2]}).transpose(1, 2).contiguous();
}

Tensor convolution(const char* op, int64_t dims, bool transposed, const Tensor& input, const Tensor& weight,
                   const Tensor& bias, const ConvArgs& a) {
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        op,
        [&](const Tensor& xc, const Tensor& wc, const Tensor& bc) {
          return convolution(op, dims, transposed, xc, wc, bc, a);
        },
        input, weight, bias);
  check_tensors(op, dims, input, weight, bias);
  check_args(op, transposed, a);
  const bool batched = input.dim() == dims + 2;
  Tensor x = batched ? input : input.unsqueeze(0);
  const int64_t cout = out_channels(op, transposed, x, weight, bias, a.groups);
  DimVector spatial_out = out_spatial(op, transposed, x, weight, a);
  if (dims == 3) {
    const Tensor out = conv3d_by_depth_taps(x, weight, bias, a, cout, spatial_out);
    return batched ? out : out.squeeze(0);
  }

  // Everything as 2D: a 1D convolution is one of height 1.
  Tensor w = weight;
  Conv2dParams p{{1, 1}, {0, 0}, {1, 1}, a.groups};
  for (int64_t d = 0; d < dims; ++d) {
    int64_t k = d + 2 - dims;
    p.stride[k] = a.stride[d], p.padding[k] = a.pad_begin[d], p.dilation[k] = a.dilation[d];
  }
  DimVector shape{x.size(0), cout};
  for (int64_t s : spatial_out) shape.push_back(s);
  if (dims == 1) x = x.unsqueeze(2), w = w.unsqueeze(2);
  Tensor out = run_conv(transposed, x, w, bias, p, dims == 1 ? 1 : shape[2], shape.back());
  // Only a 1D convolution's output needs the view: on a channels-last batch of one it would
  // recompute the batch stride as C, and the output would no longer read as channels-last.
  if (dims == 1) out = out.view(shape);
  return batched ? out : out.squeeze(0);
}

// "same" and "valid" as explicit padding; "same" puts the odd one at the end.
ConvArgs string_padding(const char* op, int64_t dims, const Tensor& weight, IntArrayRef stride,
                        PaddingMode padding, IntArrayRef dilation, int64_t groups) {
  ConvArgs a = make_args(op, dims, stride, 0, dilation, 0, groups);
  EMBER_CHECK(padding.name == "same" || padding.name == "valid", op, ": invalid padding string '",
              padding.name, "', expected 'same' or 'valid'");
  if (padding.name == "valid") return a;
  for (int64_t s : a.stride)
    EMBER_CHECK(s == 1, op, ": padding='same' is not supported for strided convolutions");
  EMBER_CHECK(weight.dim() == dims + 2, op, ": expected weight to be ", dims + 2,
              "D, but got weight of size ", weight.sizes());
  for (int64_t d = 0; d < dims; ++d) {
    int64_t total = checked_mul(op, a.dilation[d], weight.size(d + 2) - 1);
    a.pad_begin[d] = total / 2;
    a.pad_end[d] = total - total / 2;
  }
  return a;
}

}  // namespace

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv3d", input, weight, bias);
  return convolution("conv3d", 3, false, input, weight, bias,
                     make_args("conv3d", 3, stride, padding, dilation, 0, groups));
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv3d", input, weight, bias);
  return convolution("conv3d", 3, false, input, weight, bias,
                     string_padding("conv3d", 3, weight, stride, padding, dilation, groups));
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv1d", input, weight, bias);
  return convolution("conv1d", 1, false, input, weight, bias,
                     make_args("conv1d", 1, stride, padding, dilation, 0, groups));
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv1d", input, weight, bias);
  return convolution("conv1d", 1, false, input, weight, bias,
                     string_padding("conv1d", 1, weight, stride, padding, dilation, groups));
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv2d", input, weight, bias);
  return convolution("conv2d", 2, false, input, weight, bias,
                     make_args("conv2d", 2, stride, padding, dilation, 0, groups));
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              PaddingMode padding, IntArrayRef dilation, int64_t groups) {
  detail::OpRange op_range("conv2d", input, weight, bias);
  return convolution("conv2d", 2, false, input, weight, bias,
                     string_padding("conv2d", 2, weight, stride, padding, dilation, groups));
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                        IntArrayRef dilation) {
  detail::OpRange op_range("conv_transpose2d", input, weight, bias);
  return convolution("conv_transpose2d", 2, true, input, weight, bias,
                     make_args("conv_transpose2d", 2, stride, padding, dilation, output_padding, groups));
}

}  // namespace ember
