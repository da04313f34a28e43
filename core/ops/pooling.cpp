// Frontends of 2D pooling: PyTorch's argument checks and output-size rules, then the kernels
// (an unbatched input gets a batch of one; a channels-last input is pooled as NHWC), and their
// backward: max_pool2d's through its own kernels (a gather from the windows holding each
// element), or under create_graph written with ember ops (scatter_add into the argmax);
// avg_pool2d spreads over the window (a transposed convolution by ones), adaptive_avg_pool2d
// multiplies by averaging matrices.
#include "ember/core/ops/pooling.h"

#include <vector>

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/convolution.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/linalg.h"
#include "ember/core/ops/nn_util.h"

namespace ember {

constinit DispatchStub<MaxPool2dFn> max_pool2d_stub("max_pool2d");
constinit DispatchStub<MaxPool2dBackwardFn> max_pool2d_backward_stub("max_pool2d_backward");
constinit DispatchStub<AvgPool2dFn> avg_pool2d_stub("avg_pool2d");
constinit DispatchStub<AdaptiveAvgPool2dFn> adaptive_avg_pool2d_stub("adaptive_avg_pool2d");

int64_t detail::pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                            bool ceil_mode) {
  int64_t num = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

namespace {

constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({
    {"max_pool2d", NONE, true},
    {"max_pool2d_with_indices", NONE, true},
    {"avg_pool2d", NONE, true},
    {"adaptive_avg_pool2d", NONE, true},
});

void pair(const char* op, const char* what, IntArrayRef v, int64_t (&out)[2]) {
  EMBER_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what,
              " must either be a single int or a pair of ints, but got ", v);
  out[0] = v[0];
  out[1] = v.back();
}

// The layout pooling reads `input` in and writes its results in, as PyTorch's pooling (its
// suggest_memory_format): channels-last for a 4D input whose strides order the dims as NHWC.
MemoryFormat pool_format(const Tensor& input) {
  return input.dim() == 4 ? input.suggest_memory_format() : MemoryFormat::Contiguous;
}

// The input as [N, C, H, W], dense in pool_format (no copy when it already is); throws unless it
// is 3D or 4D with nonzero C, H and W.
Tensor batched(const char* op, const Tensor& input) {
  EMBER_CHECK((input.dim() == 3 || input.dim() == 4) && input.size(-1) > 0 && input.size(-2) > 0 &&
                  input.size(-3) > 0,
              op, ": expected a 3D or 4D input with non-zero channel and spatial sizes, but got ",
              "input of size ", input.sizes());
  return (input.dim() == 3 ? input.unsqueeze(0) : input).contiguous(pool_format(input));
}

using detail::pooled_size;

// Checks the window arguments and allocates the output (and its shape for an unbatched input).
struct Pooled {
  Tensor x, out;
  Pool2dParams p;
};

Pooled prepare(const char* op, const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Pooled r{batched(op, input), Tensor(), {}};
  Pool2dParams& p = r.p;
  p.memory_format = pool_format(input);
  pair(op, "kernel_size", kernel_size, p.kernel);
  pair(op, "stride", stride.empty() ? kernel_size : stride, p.stride);
  pair(op, "padding", padding, p.padding);
  pair(op, "dilation", dilation, p.dilation);
  for (int d = 0; d < 2; ++d) {
    EMBER_CHECK(p.kernel[d] > 0, op, ": kernel_size must be greater than zero, but got ", kernel_size);
    EMBER_CHECK(p.stride[d] > 0, op, ": stride must be greater than zero, but got ", stride);
    EMBER_CHECK(p.dilation[d] > 0, op, ": dilation must be greater than zero, but got ", dilation);
    EMBER_CHECK(p.padding[d] >= 0 && p.padding[d] <= p.kernel[d] / 2, op,
                ": pad should be at least 0 and at most half of kernel size, but got padding ", padding,
                " and kernel_size ", kernel_size);
  }
  const int64_t c = r.x.size(1), h = r.x.size(2), w = r.x.size(3);
  const int64_t ho = pooled_size(h, p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], ceil_mode);
  const int64_t wo = pooled_size(w, p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], ceil_mode);
  EMBER_CHECK(ho > 0 && wo > 0, op, ": given input size (", c, " x ", h, " x ", w,
              "), the calculated output size (", c, " x ", ho, " x ", wo, ") is too small");
  r.out = empty({r.x.size(0), c, ho, wo}, r.x.options().memory_format(p.memory_format));
  return r;
}

Tensor unbatch(const Tensor& out, const Tensor& input) { return input.dim() == 3 ? out.squeeze(0) : out; }

void check_float(const char* op, const Tensor& input) {
  EMBER_CHECK(is_floating_point(input.dtype()), op, ": expected a floating point input, but got ",
              input.dtype());
}

// max_pool2d's gradient, recorded for create_graph: each output's gradient added at its
// window's argmax (a flat index into the input's plane); a window that missed the input (index
// -1) sends none. It scatters along H * W of [..., C, H * W] views, or for channels-last of
// [N, H * W, C] views (NHWC memory as it is), which gives an NHWC gradient.
Tensor max_pool_backward_graph(const Tensor& gy, const Tensor& indices, IntArrayRef in_sizes,
                               bool channels_last) {
  const int64_t h = in_sizes[in_sizes.size() - 2], w = in_sizes.back();
  const int64_t dim = channels_last ? 1 : -1;
  auto spatial = [&](const Tensor& t) {
    return channels_last ? t.permute({0, 2, 3, 1}).flatten(1, 2) : t.flatten(-2);
  };
  Tensor index = spatial(indices.to(kInt64));
  Tensor src = where(index >= 0, spatial(gy), 0);
  DimVector sizes(index.sizes());
  sizes[channels_last ? 1 : sizes.size() - 1] = h * w;
  Tensor gi = scatter_add(zeros(sizes, gy.options()), dim, index.clamp(0), src);
  if (!channels_last) return gi.view(in_sizes);
  return gi.view({in_sizes[0], h, w, in_sizes[1]}).permute({0, 3, 1, 2});
}

// max_pool2d's gradient from the backward kernel (first order), in the input's layout.
Tensor max_pool_backward(const Tensor& gy, const Tensor& indices, IntArrayRef in_sizes,
                         const Pool2dParams& p) {
  const bool channels_last = p.memory_format == MemoryFormat::ChannelsLast;
  if (needs_grad({gy})) return max_pool_backward_graph(gy, indices, in_sizes, channels_last);
  const bool unbatched = in_sizes.size() == 3;
  auto batch = [&](const Tensor& t) { return unbatched ? t.unsqueeze(0) : t; };
  DimVector sizes;
  if (unbatched) sizes.push_back(1);
  for (int64_t s : in_sizes) sizes.push_back(s);
  Tensor gi = empty(sizes, gy.options().memory_format(p.memory_format));
  if (gi.numel() > 0)
    max_pool2d_backward_stub(gy.device())(gi, batch(gy).contiguous(p.memory_format), batch(indices), p);
  return unbatched ? gi.squeeze(0) : gi;
}

// avg_pool2d's gradient: each output's gradient over its window's divisor, spread over the
// window: a transposed convolution of each plane by a kernel of ones. A ceil_mode window past
// the end makes the transposed output longer than the input: the excess is cut off. The planes
// are NCHW; a channels-last input gets its gradient copied into NHWC.
Tensor avg_pool_backward(const Tensor& gy, IntArrayRef in_sizes, const Pool2dParams& p, bool ceil_mode) {
  const int64_t h = in_sizes[in_sizes.size() - 2], w = in_sizes.back();
  const int64_t ho = gy.size(-2), wo = gy.size(-1);
  Tensor g = gy.reshape({-1, 1, ho, wo});
  if (p.divisor) {
    g = g * (1.0 / static_cast<double>(p.divisor));
  } else {
    // 1 / divisor per window: the mean of ones over the sum of ones, as the forward counts.
    const TensorOptions options = TensorOptions(nn_detail::compute_dtype(gy.dtype())).device(gy.device());
    Tensor one = ones({1, 1, h, w}, options);
    IntArrayRef k(p.kernel, 2), s(p.stride, 2), pad(p.padding, 2);
    g = g * (avg_pool2d(one, k, s, pad, ceil_mode, p.count_include_pad) /
             avg_pool2d(one, k, s, pad, ceil_mode, p.count_include_pad, 1))
                .to(gy.dtype());
  }
  const int64_t full[2] = {(ho - 1) * p.stride[0] - 2 * p.padding[0] + p.kernel[0],
                           (wo - 1) * p.stride[1] - 2 * p.padding[1] + p.kernel[1]};
  const int64_t output_padding[2] = {std::max<int64_t>(0, h - full[0]), std::max<int64_t>(0, w - full[1])};
  Tensor gi =
      conv_transpose2d(g, ones({1, 1, p.kernel[0], p.kernel[1]}, g.options()), Tensor(),
                       IntArrayRef(p.stride, 2), IntArrayRef(p.padding, 2), IntArrayRef(output_padding, 2));
  DimVector full_sizes(in_sizes);
  full_sizes.end()[-2] = gi.size(2), full_sizes.end()[-1] = gi.size(3);
  return gi.reshape(full_sizes).narrow(-2, 0, h).narrow(-1, 0, w).contiguous(p.memory_format);
}

// The [out, in] matrix averaging each of adaptive_avg_pool2d's windows along one dim (the window
// of a cell is the product of its windows along H and W, so the pool is A_h @ x @ A_w^T). Built on
// x's device: input r is in window i when floor(i * in / out) <= r < ceil((i + 1) * in / out),
// that is (r + 1) * out > i * in and r * out < (i + 1) * in.
Tensor averaging_matrix(int64_t in, int64_t out, const TensorOptions& options) {
  const TensorOptions index = TensorOptions(kInt64).device(options.device());
  Tensor i = arange(out, index).unsqueeze(1), r = arange(in, index).unsqueeze(0);
  Tensor member = ((r + 1) * out > i * in).logical_and(r * out < (i + 1) * in).to(kFloat64);
  return (member / member.sum({1}, true)).to(options.dtype());
}

// adaptive_avg_pool2d's gradient, A_h^T @ gy @ A_w; for channels-last, the matrices are applied
// to the [N, Ho, Wo * C] and [N * H, Wo, C] views of NHWC memory, which gives an NHWC gradient.
// A global pool (1 x 1 output, ResNet's) spreads gy / (h * w) over each plane.
Tensor adaptive_avg_pool_backward(const Tensor& gy, int64_t h, int64_t w, bool channels_last) {
  const int64_t ho = gy.size(-2), wo = gy.size(-1);
  if (ho == 1 && wo == 1) {
    DimVector sizes(gy.sizes());
    sizes.end()[-2] = h, sizes.end()[-1] = w;
    Tensor g = (gy * (1.0 / static_cast<double>(h * w))).expand(sizes);
    return channels_last && g.dim() == 4 ? g.contiguous(MemoryFormat::ChannelsLast) : g.contiguous();
  }
  Tensor ah = averaging_matrix(h, ho, gy.options()), aw = averaging_matrix(w, wo, gy.options());
  if (!channels_last) return matmul(matmul(ah.t(), gy), aw);
  const int64_t n = gy.size(0), c = gy.size(1);
  Tensor t = matmul(ah.t(), gy.permute({0, 2, 3, 1}).reshape({n, ho, wo * c}));  // [N, H, Wo * C]
  t = matmul(aw.t(), t.view({n * h, wo, c}));                                    // [N * H, W, C]
  return t.view({n, h, w, c}).permute({0, 3, 1, 2});
}

// Both max pools; the indices are computed when returned or when backward needs them.
std::tuple<Tensor, Tensor> max_pool(const char* op, bool return_indices, const Tensor& input,
                                    IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                    IntArrayRef dilation, bool ceil_mode) {
  EMBER_CHECK(input.dtype() != kBool, op, ": not supported for bool tensors");
  const bool grad = needs_grad({input});
  Tensor out, indices;
  Pool2dParams p;
  {
    NoGradGuard no_grad;  // the batched, dense input is internal
    Pooled r = prepare(op, input, kernel_size, stride, padding, dilation, ceil_mode);
    // Kept for the backward only, int32 (indices within a plane) where a plane's size fits.
    const bool narrow = !return_indices && r.x.size(2) * r.x.size(3) <= INT32_MAX;
    if (return_indices || grad)
      indices = empty(
          r.out.sizes(),
          TensorOptions(narrow ? kInt32 : kInt64).device(input.device()).memory_format(r.p.memory_format));
    if (r.out.numel() > 0) max_pool2d_stub(input.device())(r.out, indices, r.x, r.p);
    out = unbatch(r.out, input), p = r.p;
    if (indices.defined()) indices = unbatch(indices, input);
  }
  if (grad)
    record(op, {input}, {out},
           [si = SavedTensor(indices, true), sizes = DimVector(input.sizes()), p](const GradContext& g)
               -> std::vector<Tensor> { return {max_pool_backward(g.grad(), g(si), sizes, p)}; });
  return {out, indices};
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  detail::OpRange op_range("max_pool2d_with_indices", input);
  return max_pool("max_pool2d_with_indices", true, input, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  detail::OpRange op_range("max_pool2d", input);
  return std::get<0>(max_pool("max_pool2d", false, input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  detail::OpRange op_range("avg_pool2d", input);
  check_float("avg_pool2d", input);
  EMBER_CHECK(!divisor_override || *divisor_override != 0, "avg_pool2d: divisor must be not zero");
  Tensor out;
  Pool2dParams p;
  {
    NoGradGuard no_grad;
    Pooled r = prepare("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode);
    r.p.count_include_pad = count_include_pad;
    r.p.divisor = divisor_override.value_or(0);
    if (r.out.numel() > 0) avg_pool2d_stub(input.device())(r.out, r.x, r.p);
    out = unbatch(r.out, input), p = r.p;
  }
  if (needs_grad({input}))
    record("avg_pool2d", {input}, {out},
           [sizes = DimVector(input.sizes()), p, ceil_mode](const GradContext& g) {
             return std::vector<Tensor>{avg_pool_backward(g.grad(), sizes, p, ceil_mode)};
           });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  detail::OpRange op_range("adaptive_avg_pool2d", input);
  const char* op = "adaptive_avg_pool2d";
  check_float(op, input);
  int64_t size[2];
  pair(op, "output_size", output_size, size);
  EMBER_CHECK(size[0] >= 0 && size[1] >= 0, op,
              ": elements of output_size must be greater than or equal to 0, but got ", output_size);
  const MemoryFormat format = pool_format(input);
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor x = batched(op, input);
    out = empty({x.size(0), x.size(1), size[0], size[1]}, x.options().memory_format(format));
    if (out.numel() > 0) adaptive_avg_pool2d_stub(input.device())(out, x, format);
    out = unbatch(out, input);
  }
  if (needs_grad({input}))
    record(op, {input}, {out},
           [h = input.size(-2), w = input.size(-1),
            channels_last = format == MemoryFormat::ChannelsLast](const GradContext& g) {
             return std::vector<Tensor>{adaptive_avg_pool_backward(g.grad(), h, w, channels_last)};
           });
  return out;
}

}  // namespace ember
