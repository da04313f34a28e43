// Frontends of 2D pooling: PyTorch's argument checks and output-size rules, then the kernels
// (an unbatched input gets a batch of one).
#include "ember/core/ops/pooling.h"

#include "ember/core/factories.h"
#include "ember/core/op_registry.h"

namespace ember {

constinit DispatchStub<MaxPool2dFn> max_pool2d_stub("max_pool2d");
constinit DispatchStub<AvgPool2dFn> avg_pool2d_stub("avg_pool2d");
constinit DispatchStub<AdaptiveAvgPool2dFn> adaptive_avg_pool2d_stub("adaptive_avg_pool2d");

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

// The input as [N, C, H, W]; throws unless it is 3D or 4D with nonzero C, H and W.
Tensor batched(const char* op, const Tensor& input) {
  EMBER_CHECK((input.dim() == 3 || input.dim() == 4) && input.size(-1) > 0 && input.size(-2) > 0 &&
                  input.size(-3) > 0,
              op, ": expected a 3D or 4D input with non-zero channel and spatial sizes, but got ",
              "input of size ", input.sizes());
  return (input.dim() == 3 ? input.unsqueeze(0) : input).contiguous();
}

// PyTorch's pooling_output_shape.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  int64_t num = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Checks the window arguments and allocates the output (and its shape for an unbatched input).
struct Pooled {
  Tensor x, out;
  Pool2dParams p;
};

Pooled prepare(const char* op, const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
               IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Pooled r{batched(op, input), Tensor(), {}};
  Pool2dParams& p = r.p;
  pair(op, "kernel_size", kernel_size, p.kernel);
  pair(op, "stride", stride.empty() ? kernel_size : stride, p.stride);
  pair(op, "padding", padding, p.padding);
  pair(op, "dilation", dilation, p.dilation);
  for (int d = 0; d < 2; ++d) {
    EMBER_CHECK(p.kernel[d] > 0, op, ": kernel_size must be greater than zero, but got ",
                kernel_size);
    EMBER_CHECK(p.stride[d] > 0, op, ": stride must be greater than zero, but got ", stride);
    EMBER_CHECK(p.dilation[d] > 0, op, ": dilation must be greater than zero, but got ", dilation);
    EMBER_CHECK(p.padding[d] >= 0 && p.padding[d] <= p.kernel[d] / 2, op,
                ": pad should be at least 0 and at most half of kernel size, but got padding ",
                padding, " and kernel_size ", kernel_size);
  }
  const int64_t c = r.x.size(1), h = r.x.size(2), w = r.x.size(3);
  const int64_t ho =
      pooled_size(h, p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], ceil_mode);
  const int64_t wo =
      pooled_size(w, p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], ceil_mode);
  EMBER_CHECK(ho > 0 && wo > 0, op, ": given input size (", c, " x ", h, " x ", w,
              "), the calculated output size (", c, " x ", ho, " x ", wo, ") is too small");
  r.out = empty({r.x.size(0), c, ho, wo}, r.x.options());
  return r;
}

Tensor unbatch(const Tensor& out, const Tensor& input) {
  return input.dim() == 3 ? out.squeeze(0) : out;
}

void check_float(const char* op, const Tensor& input) {
  EMBER_CHECK(is_floating_point(input.dtype()), op, ": expected a floating point input, but got ",
              input.dtype());
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_pool2d_with_indices";
  EMBER_CHECK(input.dtype() != kBool, op, ": not supported for bool tensors");
  Pooled r = prepare(op, input, kernel_size, stride, padding, dilation, ceil_mode);
  Tensor indices = empty(r.out.sizes(), TensorOptions(kInt64).device(input.device()));
  if (r.out.numel() > 0) max_pool2d_stub(input.device())(r.out, indices, r.x, r.p);
  return {unbatch(r.out, input), unbatch(indices, input)};
}

Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  EMBER_CHECK(input.dtype() != kBool, "max_pool2d: not supported for bool tensors");
  Pooled r = prepare("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode);
  if (r.out.numel() > 0) max_pool2d_stub(input.device())(r.out, Tensor(), r.x, r.p);
  return unbatch(r.out, input);
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  check_float("avg_pool2d", input);
  EMBER_CHECK(!divisor_override || *divisor_override != 0, "avg_pool2d: divisor must be not zero");
  Pooled r = prepare("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode);
  r.p.count_include_pad = count_include_pad;
  r.p.divisor = divisor_override.value_or(0);
  if (r.out.numel() > 0) avg_pool2d_stub(input.device())(r.out, r.x, r.p);
  return unbatch(r.out, input);
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_float(op, input);
  int64_t size[2];
  pair(op, "output_size", output_size, size);
  EMBER_CHECK(size[0] >= 0 && size[1] >= 0, op,
              ": elements of output_size must be greater than or equal to 0, but got ",
              output_size);
  Tensor x = batched(op, input);
  Tensor out = empty({x.size(0), x.size(1), size[0], size[1]}, x.options());
  if (out.numel() > 0) adaptive_avg_pool2d_stub(input.device())(out, x);
  return unbatch(out, input);
}

}  // namespace ember
