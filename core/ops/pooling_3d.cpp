// 3D pooling as two passes of the 2D ops (so on either device, with their backward): the input
// [N, C, D, H, W] viewed as [N, C * D, H, W] is pooled over H x W, then the result viewed as
// [N, C, D, H' * W'] over the depth with a window of width 1. A window is a product of one range
// per dim, so its max is the max over depth of the planes' maxima, and its mean (with or without
// the padding counted) the mean over depth of equal-sized planes' means.
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/pooling.h"

namespace ember {
namespace {

const OpRegistrar registrar({
    {"max_pool3d", AutocastPolicy::None, true},
    {"avg_pool3d", AutocastPolicy::None, true},
    {"adaptive_avg_pool3d", AutocastPolicy::None, true},
});

// One value per dim (D, H, W) from one or three.
struct Triple {
  int64_t v[3];
};

Triple triple(const char* op, const char* what, IntArrayRef a) {
  EMBER_CHECK(a.size() == 1 || a.size() == 3, op, ": ", what,
              " must either be a single int, or a tuple of three ints, but got ", a);
  return {{a[0], a[a.size() == 3 ? 1 : 0], a.back()}};
}

// The input as batched [N, C, D, H, W] (a view), checked.
Tensor batched_5d(const char* op, const Tensor& input) {
  EMBER_CHECK(input.defined() && (input.dim() == 4 || input.dim() == 5), op,
              ": expected a 4D (unbatched) or 5D (batched) input, but got input of size ",
              input.defined() ? input.sizes() : IntArrayRef());
  for (int64_t d = -4; d < 0; ++d)
    EMBER_CHECK(input.size(d) > 0, op,
                ": expected non-zero channel and spatial sizes, but got input of size ", input.sizes());
  EMBER_CHECK(is_floating_point(input.dtype()), op, ": expected a floating point input, but got ",
              input.dtype());
  return input.dim() == 4 ? input.unsqueeze(0) : input;
}

// The window arguments, checked as the 2D ops check theirs, naming the 3D op and shapes.
struct Windows {
  Triple kernel, stride, padding, dilation;
};

Windows windows(const char* op, const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Windows w{triple(op, "kernel_size", kernel_size),
            triple(op, "stride", stride.empty() ? kernel_size : stride), triple(op, "padding", padding),
            triple(op, "dilation", dilation)};
  int64_t out[3];
  for (int d = 0; d < 3; ++d) {
    EMBER_CHECK(w.kernel.v[d] > 0, op, ": kernel_size must be greater than zero, but got ", kernel_size);
    EMBER_CHECK(w.stride.v[d] > 0, op, ": stride must be greater than zero, but got ", stride);
    EMBER_CHECK(w.dilation.v[d] > 0, op, ": dilation must be greater than zero, but got ", dilation);
    EMBER_CHECK(w.padding.v[d] >= 0 && w.padding.v[d] <= w.kernel.v[d] / 2, op,
                ": pad should be at least 0 and at most half of kernel size, but got padding ", padding,
                " and kernel_size ", kernel_size);
    out[d] = detail::pooled_size(x.size(d + 2), w.kernel.v[d], w.padding.v[d], w.stride.v[d], w.dilation.v[d],
                                 ceil_mode);
  }
  EMBER_CHECK(out[0] > 0 && out[1] > 0 && out[2] > 0, op, ": given input size (", x.size(1), " x ", x.size(2),
              " x ", x.size(3), " x ", x.size(4), "), the calculated output size (", x.size(1), " x ", out[0],
              " x ", out[1], " x ", out[2], ") is too small");
  return w;
}

// Runs `planes` over each depth plane ([N, C * D, H, W]), then `depth` along the depth ([N, C, D,
// H' * W']); the result in the input's batching and dtype. Averages of f16 and bf16 run in
// float32, so that they round once, as the 2D ops do.
template <class Planes, class Depth>
Tensor two_passes(const Tensor& input, Tensor x, bool averages, Planes planes, Depth depth) {
  const ScalarType dtype = x.dtype();
  if (averages && is_reduced_float(dtype)) x = x.to(kFloat32);
  const int64_t n = x.size(0), c = x.size(1), d = x.size(2);
  const Tensor p = planes(x.reshape({n, c * d, x.size(3), x.size(4)}));
  const Tensor out =
      depth(p.reshape({n, c, d, p.size(2) * p.size(3)})).reshape({n, c, -1, p.size(2), p.size(3)});
  return (input.dim() == 4 ? out.squeeze(0) : out).to(dtype);
}

}  // namespace

Tensor max_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  detail::OpRange op_range("max_pool3d", input);
  const char* op = "max_pool3d";
  const Tensor x = batched_5d(op, input);
  const auto [k, s, p, dl] = windows(op, x, kernel_size, stride, padding, dilation, ceil_mode);
  return two_passes(
      input, x, /*averages=*/false,
      [&](const Tensor& t) {
        return max_pool2d(t, {k.v[1], k.v[2]}, {s.v[1], s.v[2]}, {p.v[1], p.v[2]}, {dl.v[1], dl.v[2]},
                          ceil_mode);
      },
      [&](const Tensor& t) {
        return max_pool2d(t, {k.v[0], 1}, {s.v[0], 1}, {p.v[0], 0}, {dl.v[0], 1}, ceil_mode);
      });
}

Tensor avg_pool3d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  detail::OpRange op_range("avg_pool3d", input);
  const char* op = "avg_pool3d";
  const Tensor x = batched_5d(op, input);
  EMBER_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor must be not zero");
  const auto [k, s, p, dl] = windows(op, x, kernel_size, stride, padding, 1, ceil_mode);
  // With a divisor, both passes sum (divisor 1), and the sum is divided once.
  const std::optional<int64_t> pass_divisor = divisor_override ? std::optional<int64_t>(1) : std::nullopt;
  return two_passes(
      input, x, /*averages=*/true,
      [&](const Tensor& t) {
        return avg_pool2d(t, {k.v[1], k.v[2]}, {s.v[1], s.v[2]}, {p.v[1], p.v[2]}, ceil_mode,
                          count_include_pad, pass_divisor);
      },
      [&](const Tensor& t) {
        const Tensor out =
            avg_pool2d(t, {k.v[0], 1}, {s.v[0], 1}, {p.v[0], 0}, ceil_mode, count_include_pad, pass_divisor);
        return divisor_override ? out / static_cast<double>(*divisor_override) : out;
      });
}

Tensor adaptive_avg_pool3d(const Tensor& input, IntArrayRef output_size) {
  detail::OpRange op_range("adaptive_avg_pool3d", input);
  const char* op = "adaptive_avg_pool3d";
  const Tensor x = batched_5d(op, input);
  EMBER_CHECK(output_size.size() == 3, op, ": output_size must be 3, but got ", output_size);
  for (int64_t o : output_size)
    EMBER_CHECK(o > 0, op, ": output_size must be positive, but got ", output_size);
  return two_passes(
      input, x, /*averages=*/true,
      [&](const Tensor& t) {
        return adaptive_avg_pool2d(t, {output_size[1], output_size[2]});
      },
      [&](const Tensor& t) {
        return adaptive_avg_pool2d(t, {output_size[0], t.size(3)});
      });
}

}  // namespace ember
