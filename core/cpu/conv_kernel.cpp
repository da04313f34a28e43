// CPU kernels of conv2d, conv_transpose2d and conv2d's weight gradient: im2col (col2im) around
// gemm(), one task per (image, group). f16/bf16 run in float32 and round once.
#include <algorithm>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "ember/core/cpu/gemm.h"
#include "ember/core/ops/convolution.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The geometry shared by im2col and col2im: `col` is [channels * kH * kW, col_h * col_w] and
// pixel (r, c) of an image channel [img_h, img_w] meets column (i, j) of kernel tap (kh, kw)
// when r = i * stride - padding + kh * dilation (and likewise for c). Calls f(col_offset,
// img_offset, n) for each run of n such pairs along a row: column stride 1, image stride
// p.stride[1]. Pairs that fall in the padding are skipped.
template <class F>
void for_each_run(int64_t channels, int64_t img_h, int64_t img_w, int64_t kh_size, int64_t kw_size,
                  int64_t col_h, int64_t col_w, const Conv2dParams& p, const F& f) {
  const int64_t sh = p.stride[0], sw = p.stride[1];
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kh = 0; kh < kh_size; ++kh)
      for (int64_t kw = 0; kw < kw_size; ++kw) {
        const int64_t row = ((c * kh_size + kh) * kw_size + kw) * col_h * col_w;
        const int64_t off_w = kw * p.dilation[1] - p.padding[1];
        const int64_t j0 = std::max<int64_t>(0, ceil_div(-off_w, sw));
        const int64_t j1 = std::min(col_w, ceil_div(img_w - off_w, sw));
        if (j0 >= j1) continue;
        for (int64_t i = 0; i < col_h; ++i) {
          const int64_t r = i * sh - p.padding[0] + kh * p.dilation[0];
          if (r < 0 || r >= img_h) continue;
          f(row + i * col_w + j0, (c * img_h + r) * img_w + j0 * sw + off_w, j1 - j0);
        }
      }
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

// Where a task's result is summed: the output itself when it has the compute type, else buf.
template <class C, class T>
C* accumulator(T* out, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return out;
  } else {
    buf.resize(static_cast<size_t>(n));
    return buf.data();
  }
}

// out[c, :] = acc[c, :] + bias[c] for a block of channels, rounding to T once.
template <class T, class C>
void store(const C* acc, T* out, int64_t channels, int64_t plane, const C* bias) {
  if (static_cast<const void*>(acc) == out && !bias) return;
  for (int64_t c = 0; c < channels; ++c) {
    const C b = bias ? bias[c] : C(0);
    for (int64_t i = 0; i < plane; ++i) out[c * plane + i] = static_cast<T>(acc[c * plane + i] + b);
  }
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

// The column matrix [channels * kH * kW, ho * wo] of one image's group x (im2col, zeros in the
// padding), in col; or x itself when a 1x1 kernel without stride or padding reads it as is.
template <class C, class T>
const C* im2col(const T* x, int64_t channels, int64_t h, int64_t w, int64_t kh, int64_t kw,
                int64_t ho, int64_t wo, const Conv2dParams& p, std::vector<C>& col) {
  if constexpr (std::is_same_v<T, C>)
    if (kh == 1 && kw == 1 && h == ho && w == wo && p.padding[0] == 0 && p.padding[1] == 0)
      return x;
  col.assign(static_cast<size_t>(channels * kh * kw * ho * wo), C(0));
  for_each_run(channels, h, w, kh, kw, ho, wo, p, [&](int64_t co, int64_t xo, int64_t n) {
    for (int64_t i = 0; i < n; ++i) col[co + i] = static_cast<C>(x[xo + i * p.stride[1]]);
  });
  return col.data();
}

template <class T>
void conv2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Conv2dParams& p) {
  using C = Compute<T>;
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = out.size(1), ho = out.size(2), wo = out.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cig * kh * kw, plane = ho * wo;
  std::vector<C> wbuf, bbuf;
  const C* wt = as_compute<C>(weight.data_ptr<T>(), weight.numel(), wbuf);
  const C* bs = bias.defined() ? as_compute<C>(bias.data_ptr<T>(), cout, bbuf) : nullptr;
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  run_tasks(n_img * g, 2.0 * cog * kc * plane, [&](int64_t begin, int64_t end) {
    std::vector<C> col, acc;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t / g, grp = t % g;
      const C* cols =
          im2col(in + (img * cin + grp * cig) * h * w, cig, h, w, kh, kw, ho, wo, p, col);
      T* o = po + (img * cout + grp * cog) * plane;
      C* a = accumulator(o, cog * plane, acc);
      gemm<C>({wt + grp * cog * kc, cog, kc, kc, 1}, {cols, kc, plane, plane, 1},
              {a, cog, plane, plane, 1}, C(1), C(0));
      store(a, o, cog, plane, bs ? bs + grp * cog : nullptr);
    }
  });
}

template <class T>
void conv_transpose2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight,
                            const Tensor& bias, const Conv2dParams& p) {
  using C = Compute<T>;
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = out.size(1), ho = out.size(2), wo = out.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cog * kh * kw, in_plane = h * w,
                plane = ho * wo;
  std::vector<C> wbuf, bbuf;
  const C* wt = as_compute<C>(weight.data_ptr<T>(), weight.numel(), wbuf);
  const C* bs = bias.defined() ? as_compute<C>(bias.data_ptr<T>(), cout, bbuf) : nullptr;
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  run_tasks(n_img * g, 2.0 * kc * cig * in_plane, [&](int64_t begin, int64_t end) {
    std::vector<C> xbuf, col, acc;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t / g, grp = t % g;
      const C* x = as_compute<C>(in + (img * cin + grp * cig) * in_plane, cig * in_plane, xbuf);
      // col [C_out/g * kH * kW, H * W] = weight_g^T @ x_g, weight_g being [C_in/g, C_out/g*kH*kW].
      col.resize(static_cast<size_t>(kc * in_plane));
      gemm<C>({wt + grp * cig * kc, kc, cig, 1, kc}, {x, cig, in_plane, in_plane, 1},
              {col.data(), kc, in_plane, in_plane, 1}, C(1), C(0));
      T* o = po + (img * cout + grp * cog) * plane;
      C* a = accumulator(o, cog * plane, acc);
      std::fill(a, a + cog * plane, C(0));
      for_each_run(cog, ho, wo, kh, kw, h, w, p, [&](int64_t co, int64_t oo, int64_t n) {
        for (int64_t i = 0; i < n; ++i) a[oo + i * p.stride[1]] += col[co + i];
      });
      store(a, o, cog, plane, bs ? bs + grp * cog : nullptr);
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
  const int64_t n_img = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t cout = grad_out.size(1), ho = grad_out.size(2), wo = grad_out.size(3);
  const int64_t kh = grad_weight.size(2), kw = grad_weight.size(3), g = p.groups;
  const int64_t cig = cin / g, cog = cout / g, kc = cig * kh * kw, plane = ho * wo;
  const T* in = input.data_ptr<T>();
  const T* gy = grad_out.data_ptr<T>();
  const size_t size = static_cast<size_t>(cout * kc);
  std::map<int64_t, std::vector<C>> sums;  // by the first image of their range
  std::mutex sums_mutex;
  auto images = [&](int64_t begin, int64_t end) {
    std::vector<C> col, gbuf, sum(size, C(0));
    for (int64_t img = begin; img < end; ++img)
      for (int64_t grp = 0; grp < g; ++grp) {
        const C* cols =
            im2col(in + (img * cin + grp * cig) * h * w, cig, h, w, kh, kw, ho, wo, p, col);
        const C* d = as_compute<C>(gy + (img * cout + grp * cog) * plane, cog * plane, gbuf);
        gemm<C>({d, cog, plane, plane, 1}, {cols, plane, kc, 1, plane},
                {sum.data() + grp * cog * kc, cog, kc, kc, 1}, C(1), C(1));
      }
    std::lock_guard<std::mutex> lock(sums_mutex);
    sums.emplace(begin, std::move(sum));
  };
  if (parallel_over_batch(n_img, 2.0 * cout * kc * plane))
    parallel_for(0, n_img, 1, images);
  else
    images(0, n_img);
  T* out = grad_weight.data_ptr<T>();
  for (size_t i = 0; i < size; ++i) {
    C total = 0;
    for (const auto& [begin, sum] : sums) total += sum[i];
    out[i] = static_cast<T>(total);
  }
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
