// Depthwise convolutions on NHWC memory, computed directly: conv2d with one input channel per
// group (multiplier m = output channels per group), its weight gradient, and conv_transpose2d
// with one output channel per group (conv2d's input gradient). A pixel's channels are adjacent,
// so each kernel tap is a multiply-add over a vector of channels; im2col around a gemm per group
// would instead run one strided matrix-vector product per channel.
#pragma once

#include <algorithm>
#include <vector>

#include "ember/core/ops/convolution.h"
#include "ember/core/parallel.h"

namespace ember::cpu::depthwise {

// The direct convolution's shapes: input [n, h, w, groups] (conv2d's input, the transposed
// convolution's output), output [n, ho, wo, groups * m]; a kernel of kh x kw taps.
struct Geometry {
  int64_t n, h, w, ho, wo, kh, kw, groups, m;
  Conv2dParams p;
  int64_t taps() const { return kh * kw; }
  int64_t wide() const { return groups * m; }  // the output's channels
  // The input row of output row i at tap row a, or -1 in the padding (likewise for columns).
  int64_t row(int64_t i, int64_t a) const {
    return inside(i * p.stride[0] - p.padding[0] + a * p.dilation[0], h);
  }
  int64_t col(int64_t j, int64_t b) const {
    return inside(j * p.stride[1] - p.padding[1] + b * p.dilation[1], w);
  }
  static int64_t inside(int64_t v, int64_t size) { return v >= 0 && v < size ? v : -1; }
};

// The weight [wide, taps] (compute type C) by tap: [taps, wide], a tap's weights adjacent.
template <class C>
std::vector<C> by_tap(const C* weight, const Geometry& d) {
  std::vector<C> t(static_cast<size_t>(d.taps() * d.wide()));
  for (int64_t o = 0; o < d.wide(); ++o)
    for (int64_t k = 0; k < d.taps(); ++k) t[k * d.wide() + o] = weight[o * d.taps() + k];
  return t;
}

// acc[g m + k] += x[g] * wt[g m + k] over the groups g and k < m.
template <class C, class T>
void multiply_add(C* acc, const T* x, const C* wt, int64_t groups, int64_t m) {
  if (m == 1) {
    for (int64_t g = 0; g < groups; ++g) acc[g] += static_cast<C>(x[g]) * wt[g];
    return;
  }
  for (int64_t g = 0; g < groups; ++g) {
    const C xg = static_cast<C>(x[g]);
    for (int64_t k = 0; k < m; ++k) acc[g * m + k] += xg * wt[g * m + k];
  }
}

// For the pixels (img, i, j) of image rows [begin, end) of an output grid [n * rows, cols]:
// before(pixel), then f(source, tap) for each kernel tap whose source pixel (img, r, q) of
// a [n, src_rows, src_cols] grid lies inside (r = src_row(i, a), q = src_col(j, b), -1 outside),
// then after(pixel). Pixels are numbered row by row in their grid.
template <class R, class Q, class Before, class F, class After>
void for_each_tap(const Geometry& d, int64_t begin, int64_t end, int64_t rows, int64_t cols, int64_t src_rows,
                  int64_t src_cols, const R& src_row, const Q& src_col, const Before& before, const F& f,
                  const After& after) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t img = row / rows, i = row % rows;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t pixel = row * cols + j;
      before(pixel);
      for (int64_t a = 0; a < d.kh; ++a) {
        const int64_t r = src_row(i, a);
        if (r < 0) continue;
        for (int64_t b = 0; b < d.kw; ++b) {
          const int64_t q = src_col(j, b);
          if (q >= 0) f((img * src_rows + r) * src_cols + q, a * d.kw + b);
        }
      }
      after(pixel);
    }
  }
}

// for_each_tap over conv2d's output pixels and the input pixels under their taps.
template <class Before, class F, class After>
void for_each_conv2d_tap(const Geometry& d, int64_t begin, int64_t end, const Before& before, const F& f,
                         const After& after) {
  for_each_tap(
      d, begin, end, d.ho, d.wo, d.h, d.w, [&](int64_t i, int64_t a) { return d.row(i, a); },
      [&](int64_t j, int64_t b) { return d.col(j, b); }, before, f, after);
}

// out [n, ho, wo, groups * m] = conv2d(x [n, h, w, groups], weight [groups * m, taps]) + bias.
template <class T, class C>
void conv2d(T* out, const T* x, const C* weight, const C* bias, const Geometry& d) {
  const std::vector<C> wt = by_tap(weight, d);
  const int64_t wide = d.wide();
  parallel_for(0, d.n * d.ho, 1, [&](int64_t begin, int64_t end) {
    std::vector<C> acc(static_cast<size_t>(wide));
    for_each_conv2d_tap(
        d, begin, end, [&](int64_t) { std::fill(acc.begin(), acc.end(), C(0)); },
        [&](int64_t src, int64_t tap) {
          multiply_add(acc.data(), x + src * d.groups, wt.data() + tap * wide, d.groups, d.m);
        },
        [&](int64_t pixel) {
          for (int64_t o = 0; o < wide; ++o)
            out[pixel * wide + o] = static_cast<T>(acc[o] + (bias ? bias[o] : C(0)));
        });
  });
}

// out [n, h, w, groups] = conv_transpose2d(x [n, ho, wo, groups * m], weight [groups * m, taps])
// + bias: each output pixel gathers the input pixels whose taps land on it.
template <class T, class C>
void conv_transpose2d(T* out, const T* x, const C* weight, const C* bias, const Geometry& d) {
  const std::vector<C> wt = by_tap(weight, d);
  const int64_t wide = d.wide(), groups = d.groups, m = d.m;
  // The input row (column) whose tap a lands on output row r, or -1.
  auto source = [](int64_t r, int64_t a, int64_t stride, int64_t pad, int64_t dil, int64_t size) {
    const int64_t v = r + pad - a * dil;
    return v >= 0 && v % stride == 0 && v / stride < size ? v / stride : int64_t{-1};
  };
  auto src_row = [&](int64_t r, int64_t a) {
    return source(r, a, d.p.stride[0], d.p.padding[0], d.p.dilation[0], d.ho);
  };
  auto src_col = [&](int64_t q, int64_t b) {
    return source(q, b, d.p.stride[1], d.p.padding[1], d.p.dilation[1], d.wo);
  };
  parallel_for(0, d.n * d.h, 1, [&](int64_t begin, int64_t end) {
    std::vector<C> acc(static_cast<size_t>(groups));
    for_each_tap(
        d, begin, end, d.h, d.w, d.ho, d.wo, src_row, src_col,
        [&](int64_t) { std::fill(acc.begin(), acc.end(), C(0)); },
        [&](int64_t src, int64_t tap) {
          const T* xp = x + src * wide;
          const C* wp = wt.data() + tap * wide;
          if (m == 1) {
            for (int64_t g = 0; g < groups; ++g) acc[g] += static_cast<C>(xp[g]) * wp[g];
          } else {
            for (int64_t g = 0; g < groups; ++g)
              for (int64_t k = 0; k < m; ++k) acc[g] += static_cast<C>(xp[g * m + k]) * wp[g * m + k];
          }
        },
        [&](int64_t pixel) {
          for (int64_t g = 0; g < groups; ++g)
            out[pixel * groups + g] = static_cast<T>(acc[g] + (bias ? bias[g] : C(0)));
        });
  });
}

// grad_weight [groups * m, taps] of conv2d from x [n, h, w, groups] and grad_out [n, ho, wo,
// groups * m], summed over ranges of output rows in a fixed order (parallel_sum).
template <class T, class C>
void conv2d_weight(T* grad_weight, const T* x, const T* grad_out, const Geometry& d) {
  const int64_t wide = d.wide(), taps = d.taps();
  const std::vector<C> total = parallel_sum<C>(  // [taps, wide]
      0, d.n * d.ho, 1, static_cast<size_t>(taps * wide),
      [&](int64_t begin, int64_t end, std::vector<C>& sum) {
        std::vector<C> gy(static_cast<size_t>(wide));
        for_each_conv2d_tap(
            d, begin, end,
            [&](int64_t pixel) {
              for (int64_t o = 0; o < wide; ++o) gy[o] = static_cast<C>(grad_out[pixel * wide + o]);
            },
            // sum[tap, g m + k] += x[g] * gy[g m + k]
            [&](int64_t src, int64_t tap) {
              multiply_add(sum.data() + tap * wide, x + src * d.groups, gy.data(), d.groups, d.m);
            },
            [](int64_t) {});
      });
  for (int64_t o = 0; o < wide; ++o)
    for (int64_t k = 0; k < taps; ++k) grad_weight[o * taps + k] = static_cast<T>(total[k * wide + o]);
}

}  // namespace ember::cpu::depthwise
