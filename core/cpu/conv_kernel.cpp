// CPU kernels of conv2d, conv_transpose2d and conv2d's weight gradient: im2col (col2im) around
// gemm(), one task per (image, group), on NCHW or NHWC (channels-last) memory; depthwise ones on
// NHWC memory directly (conv_depthwise.h). f16/bf16 run in float32 and round once.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/core/cpu/conv_depthwise.h"
#include "ember/core/cpu/gemm.h"
#include "ember/core/ops/convolution.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The k in [0, count) whose image coordinate offset + k * step lies in [0, size): [first, last).
std::pair<int64_t, int64_t> inside(int64_t offset, int64_t step, int64_t size, int64_t count) {
  return {std::max<int64_t>(0, ceil_div(-offset, step)), std::min(count, ceil_div(size - offset, step))};
}

// `groups` adjacent groups of `channels` channels of an image of h x w pixels: channel c of pixel
// (r, q) lies at (c * h + r) * w + q in NCHW memory (groups == 1), at (r * w + q) * pixel_stride + c
// in NHWC memory.
struct Image {
  int64_t channels, h, w, pixel_stride, groups;
  bool nhwc;
};

// The geometry shared by im2col and col2im. `col` holds [channels * kH * kW, col_h * col_w] per
// group: in NCHW, rows (c, kh, kw) of col_h * col_w; in NHWC, col_h * col_w rows of (group, kh, kw,
// c), so that its taps are ordered as the weight's in each layout. Pixel (r, q) of `im` meets column (i, j)
// of kernel tap (kh, kw) when r = i * stride - padding + kh * dilation (and likewise for q).
// Calls f(col_offset, img_offset, n, img_step) for each run of n such pairs: col stride 1, image
// stride img_step. Pairs that fall in the padding are skipped.
template <class F>
void for_each_run(const Image& im, int64_t kh_size, int64_t kw_size, int64_t col_h, int64_t col_w,
                  const Conv2dParams& p, const F& f) {
  const int64_t sh = p.stride[0], sw = p.stride[1], dh = p.dilation[0], dw = p.dilation[1];
  if (!im.nhwc) {
    for (int64_t c = 0; c < im.channels; ++c)
      for (int64_t kh = 0; kh < kh_size; ++kh)
        for (int64_t kw = 0; kw < kw_size; ++kw) {
          const int64_t row = ((c * kh_size + kh) * kw_size + kw) * col_h * col_w;
          const int64_t off_w = kw * dw - p.padding[1];
          const auto [j0, j1] = inside(off_w, sw, im.w, col_w);
          if (j0 >= j1) continue;
          for (int64_t i = 0; i < col_h; ++i) {
            const int64_t r = i * sh - p.padding[0] + kh * dh;
            if (r < 0 || r >= im.h) continue;
            f(row + i * col_w + j0, (c * im.h + r) * im.w + j0 * sw + off_w, j1 - j0, sw);
          }
        }
    return;
  }
  // NHWC: runs of channels; the taps of adjacent kernel columns join into one run when the image
  // holds nothing between their pixels (no dilation, one group).
  const int64_t ch = im.channels, ps = im.pixel_stride, taps = kh_size * kw_size * ch;
  const bool join = dw == 1 && ps == ch;
  for (int64_t i = 0; i < col_h; ++i)
    for (int64_t j = 0; j < col_w; ++j) {
      const int64_t q0 = j * sw - p.padding[1];  // the image column of tap kw = 0
      const auto [kw0, kw1] = inside(q0, dw, im.w, kw_size);
      if (kw0 >= kw1) continue;
      for (int64_t kh = 0; kh < kh_size; ++kh) {
        const int64_t r = i * sh - p.padding[0] + kh * dh;
        if (r < 0 || r >= im.h) continue;
        const int64_t col = (i * col_w + j) * im.groups * taps + kh * kw_size * ch;
        const int64_t img = (r * im.w + q0) * ps;
        if (join) {
          f(col + kw0 * ch, img + kw0 * ch, (kw1 - kw0) * ch, 1);
        } else {
          for (int64_t kw = kw0; kw < kw1; ++kw)
            for (int64_t grp = 0; grp < im.groups; ++grp)
              f(col + grp * taps + kw * ch, img + kw * dw * ps + grp * ch, ch, 1);
        }
      }
    }
}

template <class T>
MatrixRef<T> transpose(MatrixRef<T> m) {
  return {m.data, m.cols, m.rows, m.col_stride, m.row_stride};
}

// The [channels, pixels] block of an image's group at `data`: rows of pixels in NCHW, columns of
// pixel_stride channels in NHWC.
template <class T>
MatrixRef<T> block(T* data, int64_t channels, int64_t pixels, int64_t pixel_stride, bool nhwc) {
  return nhwc ? MatrixRef<T>{data, channels, pixels, 1, pixel_stride}
              : MatrixRef<T>{data, channels, pixels, pixels, 1};
}

// Where group grp of image img starts in a tensor of `channels` channels (cg a group) of `plane`
// pixels.
int64_t group_offset(int64_t img, int64_t grp, int64_t channels, int64_t cg, int64_t plane, bool nhwc) {
  return nhwc ? img * channels * plane + grp * cg : (img * channels + grp * cg) * plane;
}

// gemm() for a c with a unit stride along its rows or its columns: c^T = b^T a^T in the latter
// case.
template <class C>
void gemm_any(MatrixRef<const C> a, MatrixRef<const C> b, MatrixRef<C> c, C alpha, C beta) {
  if (c.col_stride == 1 || c.cols == 1)
    gemm<C>(a, b, {c.data, c.rows, c.cols, c.row_stride, 1}, alpha, beta);
  else
    gemm<C>(transpose(b), transpose(a), transpose(c), alpha, beta);
}

// The type the products run in: float32 for f16/bf16.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

// `t` (contiguous) as C: in place, or converted into buf.
template <class C, class T>
const C* as_compute(const T* t, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return t;
  } else {
    buf.assign(t, t + n);
    return buf.data();
  }
}

// A compact matrix in buf, ordered as m (row-major when m's columns are adjacent).
template <class C, class T>
MatrixRef<C> compact_like(MatrixRef<T> m, std::vector<C>& buf) {
  buf.resize(static_cast<size_t>(m.rows * m.cols));
  return m.col_stride == 1 ? MatrixRef<C>{buf.data(), m.rows, m.cols, m.cols, 1}
                           : MatrixRef<C>{buf.data(), m.rows, m.cols, 1, m.rows};
}

// Block m as C: in place, or converted into buf.
template <class C, class T>
MatrixRef<const C> as_compute(MatrixRef<const T> m, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return m;
  } else {
    MatrixRef<C> out = compact_like(m, buf);
    const bool t = m.col_stride != 1;
    const MatrixRef<const T> src = t ? transpose(m) : m;
    const MatrixRef<C> dst = t ? transpose(out) : out;
    for (int64_t i = 0; i < src.rows; ++i)
      for (int64_t j = 0; j < src.cols; ++j)
        dst.data[i * dst.row_stride + j] = static_cast<C>(src.data[i * src.row_stride + j]);
    return {out.data, out.rows, out.cols, out.row_stride, out.col_stride};
  }
}

// Where a task's result is summed: the output block itself when it has the compute type, else
// buf.
template <class C, class T>
MatrixRef<C> accumulator(MatrixRef<T> out, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>)
    return out;
  else
    return compact_like(out, buf);
}

// Calls f(row) for each row of m, or of m^T when m's unit stride is along its rows.
template <class T, class F>
void for_each_row(MatrixRef<T> m, const F& f) {
  if (m.col_stride != 1) m = transpose(m);
  for (int64_t i = 0; i < m.rows; ++i) f(i, m.data + i * m.row_stride, m.cols);
}

// out[c, :] = acc[c, :] + bias[c] for a [channels, pixels] block, rounding to T once; acc is out
// or a compact block ordered as out.
template <class T, class C>
void store(MatrixRef<const C> acc, MatrixRef<T> out, const C* bias) {
  if (static_cast<const void*>(acc.data) == out.data && !bias) return;
  const bool by_channel = out.col_stride == 1;  // rows of out are channels
  const MatrixRef<const C> a = by_channel ? acc : transpose(acc);
  for_each_row(out, [&](int64_t i, T* o, int64_t n) {
    const C* ai = a.data + i * a.row_stride;
    if (by_channel) {
      const C b = bias ? bias[i] : C(0);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<T>(ai[k] + b);
    } else {
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<T>(ai[k] + (bias ? bias[k] : C(0)));
    }
  });
}

// Runs task(begin, end) over images x groups: one per thread when there are enough of them,
// else one at a time with the GEMM multithreaded.
template <class F>
void run_tasks(int64_t tasks, double flops, const F& task) {
  if (parallel_over_batch(tasks, flops))
    parallel_for(0, tasks, 1, task);
  else
    task(0, tasks);
}

// The column matrix [channels * kH * kW, ho * wo] of the first of im.groups groups of an image at x
// (im2col, zeros in the padding), in col; or x itself when a 1x1 kernel without stride or padding
// reads it as is. group_of gives the others.
template <class C, class T>
MatrixRef<const C> im2col(const T* x, const Image& im, int64_t kh, int64_t kw, int64_t ho, int64_t wo,
                          const Conv2dParams& p, std::vector<C>& col) {
  if constexpr (std::is_same_v<T, C>)
    if (kh == 1 && kw == 1 && im.h == ho && im.w == wo && p.padding[0] == 0 && p.padding[1] == 0)
      return block(x, im.channels, ho * wo, im.pixel_stride, im.nhwc);
  const int64_t taps = im.channels * kh * kw;
  col.assign(static_cast<size_t>(im.groups * taps * ho * wo), C(0));
  for_each_run(im, kh, kw, ho, wo, p, [&](int64_t co, int64_t xo, int64_t n, int64_t step) {
    for (int64_t i = 0; i < n; ++i) col[co + i] = static_cast<C>(x[xo + i * step]);
  });
  return block<const C>(col.data(), taps, ho * wo, im.groups * taps, im.nhwc);
}

// Group grp of the groups an NHWC im2col holds (adjacent taps of each pixel).
template <class C>
MatrixRef<const C> group_of(MatrixRef<const C> cols, int64_t grp) {
  cols.data += grp * cols.rows;
  return cols;
}

// Whether the kernel reads NHWC memory: the frontend passes all tensors contiguous or all
// channels-last, and one that is both has the same memory either way.
bool channels_last(const Tensor& a, const Tensor& b, const Tensor& c) {
  return !(a.is_contiguous() && b.is_contiguous() && c.is_contiguous());
}

template <class T>
void conv2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Conv2dParams& p) {
  using C = Compute<T>;
  const bool nhwc = channels_last(out, input, weight);
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = out.size(1), ho = out.size(2), wo = out.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cig * kh * kw, plane = ho * wo;
  std::vector<C> wbuf, bbuf;
  const C* wt = as_compute<C>(weight.data_ptr<T>(), weight.numel(), wbuf);
  const C* bs = bias.defined() ? as_compute<C>(bias.data_ptr<T>(), cout, bbuf) : nullptr;
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  if (nhwc && cig == 1)
    return depthwise::conv2d<T, C>(po, in, wt, bs, {n_img, h, w, ho, wo, kh, kw, g, cog, p});
  // In NHWC a group's channels are a strided slice of each pixel: one im2col reads all of an
  // image's groups, and a task runs them all.
  const int64_t gt = nhwc ? g : 1;
  const Image im{cig, h, w, cin, gt, nhwc};
  run_tasks(n_img * g / gt, 2.0 * gt * cog * kc * plane, [&](int64_t begin, int64_t end) {
    std::vector<C> col, acc;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t * gt / g, grp0 = t * gt % g;
      const MatrixRef<const C> cols =
          im2col(in + group_offset(img, grp0, cin, cig, h * w, nhwc), im, kh, kw, ho, wo, p, col);
      for (int64_t grp = grp0; grp < grp0 + gt; ++grp) {
        const MatrixRef<T> o =
            block(po + group_offset(img, grp, cout, cog, plane, nhwc), cog, plane, cout, nhwc);
        const MatrixRef<C> a = accumulator(o, acc);
        gemm_any<C>({wt + grp * cog * kc, cog, kc, kc, 1}, group_of(cols, grp - grp0), a, C(1), C(0));
        store<T, C>({a.data, a.rows, a.cols, a.row_stride, a.col_stride}, o, bs ? bs + grp * cog : nullptr);
      }
    }
  });
}

template <class T>
void conv_transpose2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Conv2dParams& p) {
  using C = Compute<T>;
  const bool nhwc = channels_last(out, input, weight);
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = out.size(1), ho = out.size(2), wo = out.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cog * kh * kw, in_plane = h * w, plane = ho * wo;
  std::vector<C> wbuf, bbuf;
  const C* wt = as_compute<C>(weight.data_ptr<T>(), weight.numel(), wbuf);
  const C* bs = bias.defined() ? as_compute<C>(bias.data_ptr<T>(), cout, bbuf) : nullptr;
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  if (nhwc && cog == 1)
    return depthwise::conv_transpose2d<T, C>(po, in, wt, bs, {n_img, ho, wo, h, w, kh, kw, g, cig, p});
  run_tasks(n_img * g, 2.0 * kc * cig * in_plane, [&](int64_t begin, int64_t end) {
    std::vector<C> xbuf, col, acc;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t / g, grp = t % g;
      const MatrixRef<const C> x = as_compute(
          block(in + group_offset(img, grp, cin, cig, in_plane, nhwc), cig, in_plane, cin, nhwc), xbuf);
      // col [C_out/g * kH * kW, H * W] = weight_g^T @ x_g, weight_g being [C_in/g, C_out/g*kH*kW].
      col.resize(static_cast<size_t>(kc * in_plane));
      gemm_any<C>({wt + grp * cig * kc, kc, cig, 1, kc}, x, block(col.data(), kc, in_plane, kc, nhwc), C(1),
                  C(0));
      const MatrixRef<T> o =
          block(po + group_offset(img, grp, cout, cog, plane, nhwc), cog, plane, cout, nhwc);
      const MatrixRef<C> a = accumulator(o, acc);
      for_each_row(a, [](int64_t, C* row, int64_t n) { std::fill(row, row + n, C(0)); });
      for_each_run(Image{cog, ho, wo, a.col_stride, 1, nhwc}, kh, kw, h, w, p,
                   [&](int64_t co, int64_t oo, int64_t n, int64_t step) {
                     for (int64_t i = 0; i < n; ++i) a.data[oo + i * step] += col[co + i];
                   });
      store<T, C>({a.data, a.rows, a.cols, a.row_stride, a.col_stride}, o, bs ? bs + grp * cog : nullptr);
    }
  });
}

// grad_weight_g [C_out/g, C_in/g * kH * kW] = sum over images of grad_out_g [C_out/g, Ho * Wo]
// @ col_g^T: the forward's column matrices again. Images are split over the threads when there
// are enough of them, each summing its range into its own buffer; the buffers are then added in
// the order of their ranges, so that the result does not depend on the threads' timing.
template <class T>
void conv2d_weight_typed(const Tensor& grad_weight, const Tensor& input, const Tensor& grad_out,
                         const Conv2dParams& p) {
  using C = Compute<T>;
  const bool nhwc = channels_last(grad_weight, input, grad_out);
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = grad_out.size(1), ho = grad_out.size(2), wo = grad_out.size(3);
  const int64_t kh = grad_weight.size(2), kw = grad_weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cig * kh * kw, plane = ho * wo;
  const T* in = input.data_ptr<T>();
  const T* gy = grad_out.data_ptr<T>();
  if (nhwc && cig == 1)
    return depthwise::conv2d_weight<T, C>(grad_weight.data_ptr<T>(), in, gy,
                                          {n_img, h, w, ho, wo, kh, kw, g, cog, p});
  const size_t size = static_cast<size_t>(cout * kc);
  const int64_t gt = nhwc ? g : 1;  // groups per im2col, as in conv2d_typed
  const Image im{cig, h, w, cin, gt, nhwc};
  // Images over the threads when there are enough of them.
  const int64_t grain = parallel_over_batch(n_img, 2.0 * cout * kc * plane) ? 1 : n_img;
  const std::vector<C> total =
      parallel_sum<C>(0, n_img, grain, size, [&](int64_t begin, int64_t end, std::vector<C>& sum) {
        std::vector<C> col, gbuf;
        for (int64_t img = begin; img < end; ++img)
          for (int64_t grp0 = 0; grp0 < g; grp0 += gt) {
            const MatrixRef<const C> cols =
                im2col(in + group_offset(img, grp0, cin, cig, h * w, nhwc), im, kh, kw, ho, wo, p, col);
            for (int64_t grp = grp0; grp < grp0 + gt; ++grp) {
              const MatrixRef<const C> d = as_compute(
                  block(gy + group_offset(img, grp, cout, cog, plane, nhwc), cog, plane, cout, nhwc), gbuf);
              gemm_any<C>(d, transpose(group_of(cols, grp - grp0)),
                          {sum.data() + grp * cog * kc, cog, kc, kc, 1}, C(1), C(1));
            }
          }
      });
  T* out = grad_weight.data_ptr<T>();
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<T>(total[i]);
}

template <bool Transposed>
void conv_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const Conv2dParams& p) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_floating_point(dtype_of<T>))
      EMBER_CHECK(false, "conv2d: no CPU kernel for ", out.dtype());
    else if constexpr (Transposed)
      conv_transpose2d_typed<T>(out, input, weight, bias, p);
    else
      conv2d_typed<T>(out, input, weight, bias, p);
  });
}

void conv_weight_kernel(const Tensor& grad_weight, const Tensor& input, const Tensor& grad_out,
                        const Conv2dParams& p) {
  visit_dtype(grad_weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_floating_point(dtype_of<T>))
      EMBER_CHECK(false, "conv2d: no CPU weight gradient kernel for ", grad_weight.dtype());
    else
      conv2d_weight_typed<T>(grad_weight, input, grad_out, p);
  });
}

KernelRegistrar<Conv2dFn> reg_conv(conv2d_stub, kCPU, &conv_kernel<false>);
KernelRegistrar<Conv2dFn> reg_conv_t(conv_transpose2d_stub, kCPU, &conv_kernel<true>);
KernelRegistrar<Conv2dWeightFn> reg_conv_w(conv2d_weight_stub, kCPU, &conv_weight_kernel);

}  // namespace
}  // namespace ember::cpu
