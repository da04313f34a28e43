// CPU kernels of 2D pooling. Each kernel walks its tensors as row-major [P, H, W, V]: contiguous
// NCHW is P = N * C planes of V = 1 channel, channels-last NHWC is P = N planes of V = C
// channels. A window is reduced for a block of up to kBlock channels at once (loads along C in
// NHWC); in NCHW the block is a single scalar, known at compile time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ember/core/ops/pooling.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

// The type windows are reduced in: float for f16/bf16.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <bool kChannelsLast>
constexpr int64_t kBlock = kChannelsLast ? 16 : 1;

// The [P, H, W, V] geometry of a pooling call (H, W of the input; Ho, Wo of out).
template <bool kChannelsLast>
struct Planes {
  int64_t planes, h, w, ho, wo, channels;

  Planes(const Tensor& out, const Tensor& input)
      : planes(kChannelsLast ? out.size(0) : out.size(0) * out.size(1)),
        h(input.size(2)),
        w(input.size(3)),
        ho(out.size(2)),
        wo(out.size(3)),
        channels(kChannelsLast ? out.size(1) : 1) {}

  // V, a constant 1 for NCHW.
  int64_t v() const {
    if constexpr (kChannelsLast) return channels;
    return 1;
  }

  // Runs f(plane, oh) over the P * Ho output rows, about 32K window reads per task.
  template <class F>
  void for_each_row(int64_t reads_per_cell, const F& f) const {
    const int64_t cost = std::max<int64_t>(1, wo * v() * reads_per_cell);
    parallel_for(0, planes * ho, std::max<int64_t>(1, 32768 / cost), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) f(row / ho, row % ho);
    });
  }

  // Runs f(c0, n) over the blocks [c0, c0 + n) of the V channels.
  template <class F>
  void for_each_block(const F& f) const {
    for (int64_t c0 = 0; c0 < v(); c0 += kBlock<kChannelsLast>)
      f(c0, std::min(kBlock<kChannelsLast>, v() - c0));
  }
};

template <class T, bool kChannelsLast>
void max_pool_typed(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  using A = Acc<T>;
  constexpr int64_t kB = kBlock<kChannelsLast>;
  const Planes<kChannelsLast> g(out, input);
  const int64_t h = g.h, w = g.w, v = g.v();
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const PoolIndices pi = PoolIndices::of(indices);
  g.for_each_row(p.kernel[0] * p.kernel[1], [&](int64_t plane, int64_t oh) {
    const T* x = in + plane * h * w * v;
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      const int64_t o = ((plane * g.ho + oh) * g.wo + ow) * v;
      g.for_each_block([&](int64_t c0, int64_t n) {
        A best[kB];
        int64_t arg[kB];
        for (int64_t c = 0; c < n; ++c) {
          best[c] = std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                         : std::numeric_limits<A>::lowest();
          arg[c] = -1;
        }
        for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
          if (ih < 0 || ih >= h) continue;
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (iw < 0 || iw >= w) continue;
            const T* xc = x + (ih * w + iw) * v + c0;
            for (int64_t c = 0; c < n; ++c) {
              const A val = static_cast<A>(xc[c]);
              bool nan = false;
              if constexpr (std::is_floating_point_v<A>) nan = std::isnan(val);
              // NaN wins, as in PyTorch.
              if (arg[c] < 0 || val > best[c] || nan) best[c] = val, arg[c] = ih * w + iw;
            }
          }
        }
        for (int64_t c = 0; c < n; ++c) {
          po[o + c0 + c] = static_cast<T>(best[c]);
          if (pi.data) pi.set(o + c0 + c, arg[c]);
        }
      });
    }
  });
}

// Each input element's gradient: the sum over the windows (in order) whose maximum it is.
template <class T, bool kChannelsLast>
void max_pool_backward_typed(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                             const Pool2dParams& p) {
  using A = Acc<T>;
  const Planes<kChannelsLast> g(grad_out, grad_in);
  const int64_t h = g.h, w = g.w, v = g.v();
  const T* go = grad_out.data_ptr<T>();
  const PoolIndices idx = PoolIndices::of(indices);
  T* gi = grad_in.data_ptr<T>();
  const int64_t cost = std::max<int64_t>(1, w * v * p.kernel[0] * p.kernel[1]);
  parallel_for(0, g.planes * h, std::max<int64_t>(1, 32768 / cost), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t plane = row / h, ih = row % h;
      const WindowRange rh =
          windows_containing(ih, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], g.ho);
      for (int64_t iw = 0; iw < w; ++iw) {
        const WindowRange rw =
            windows_containing(iw, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], g.wo);
        for (int64_t c = 0; c < v; ++c) {
          A sum = 0;
          for (int64_t oh = rh.begin; oh < rh.end; ++oh)
            for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
              const int64_t o = ((plane * g.ho + oh) * g.wo + ow) * v + c;
              if (idx.get(o) == ih * w + iw) sum += static_cast<A>(go[o]);
            }
          gi[((plane * h + ih) * w + iw) * v + c] = static_cast<T>(sum);
        }
      }
    }
  });
}

template <class T, bool kChannelsLast>
void avg_pool_typed(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  using A = Acc<T>;
  constexpr int64_t kB = kBlock<kChannelsLast>;
  const Planes<kChannelsLast> g(out, input);
  const int64_t h = g.h, w = g.w, v = g.v();
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  g.for_each_row(p.kernel[0] * p.kernel[1], [&](int64_t plane, int64_t oh) {
    const T* x = in + plane * h * w * v;
    for (int64_t ow = 0; ow < g.wo; ++ow) {
      // The window, clipped first to the padded input (count_include_pad's size), then to it.
      int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
      int64_t h1 = std::min(h0 + p.kernel[0], h + p.padding[0]);
      int64_t w1 = std::min(w0 + p.kernel[1], w + p.padding[1]);
      const int64_t padded_size = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
      h1 = std::min(h1, h), w1 = std::min(w1, w);
      const int64_t size = std::max<int64_t>(0, h1 - h0) * std::max<int64_t>(0, w1 - w0);
      const int64_t divisor = p.divisor ? p.divisor : p.count_include_pad ? padded_size : size;
      const int64_t o = ((plane * g.ho + oh) * g.wo + ow) * v;
      g.for_each_block([&](int64_t c0, int64_t n) {
        A sum[kB] = {};
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T* xc = x + (ih * w + iw) * v + c0;
            for (int64_t c = 0; c < n; ++c) sum[c] += static_cast<A>(xc[c]);
          }
        for (int64_t c = 0; c < n; ++c)
          po[o + c0 + c] = static_cast<T>(size > 0 ? sum[c] / static_cast<A>(divisor) : A(0));
      });
    }
  });
}

template <class T, bool kChannelsLast>
void adaptive_avg_pool_typed(const Tensor& out, const Tensor& input) {
  using A = Acc<T>;
  constexpr int64_t kB = kBlock<kChannelsLast>;
  const Planes<kChannelsLast> g(out, input);
  const int64_t h = g.h, w = g.w, ho = g.ho, wo = g.wo, v = g.v();
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const int64_t reads = ((h + ho - 1) / ho + 1) * ((w + wo - 1) / wo + 1);
  g.for_each_row(reads, [&](int64_t plane, int64_t oh) {
    const T* x = in + plane * h * w * v;
    const int64_t h0 = oh * h / ho, h1 = ((oh + 1) * h + ho - 1) / ho;
    for (int64_t ow = 0; ow < wo; ++ow) {
      const int64_t w0 = ow * w / wo, w1 = ((ow + 1) * w + wo - 1) / wo;
      const int64_t o = ((plane * ho + oh) * wo + ow) * v;
      g.for_each_block([&](int64_t c0, int64_t n) {
        A sum[kB] = {};
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T* xc = x + (ih * w + iw) * v + c0;
            for (int64_t c = 0; c < n; ++c) sum[c] += static_cast<A>(xc[c]);
          }
        for (int64_t c = 0; c < n; ++c)
          po[o + c0 + c] = static_cast<T>(sum[c] / static_cast<A>((h1 - h0) * (w1 - w0)));
      });
    }
  });
}

// Calls f(std::bool_constant<channels-last>{}).
template <class F>
void visit_layout(MemoryFormat format, const F& f) {
  if (format == MemoryFormat::ChannelsLast) return f(std::true_type{});
  f(std::false_type{});
}

void max_pool_kernel(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      EMBER_CHECK(false, "max_pool2d: no CPU kernel for bool");
    else
      visit_layout(p.memory_format,
                   [&](auto cl) { max_pool_typed<T, decltype(cl)::value>(out, indices, input, p); });
  });
}

// The floating dtypes; the frontends reject the others.
template <class F>
void visit_float(const char* op, ScalarType t, const F& f) {
  switch (t) {
    case kFloat64:
      return f(double{});
    case kFloat32:
      return f(float{});
    case kFloat16:
      return f(Half{});
    case kBFloat16:
      return f(BFloat16{});
    default:
      EMBER_CHECK(false, op, ": no CPU kernel for ", t);
  }
}

void max_pool_backward_kernel(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                              const Pool2dParams& p) {
  visit_float("max_pool2d_backward", grad_in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_layout(p.memory_format, [&](auto cl) {
      max_pool_backward_typed<T, decltype(cl)::value>(grad_in, grad_out, indices, p);
    });
  });
}

void avg_pool_kernel(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  visit_float("avg_pool2d", out.dtype(), [&](auto tag) {
    visit_layout(p.memory_format,
                 [&](auto cl) { avg_pool_typed<decltype(tag), decltype(cl)::value>(out, input, p); });
  });
}

void adaptive_avg_pool_kernel(const Tensor& out, const Tensor& input, MemoryFormat format) {
  visit_float("adaptive_avg_pool2d", out.dtype(), [&](auto tag) {
    visit_layout(format,
                 [&](auto cl) { adaptive_avg_pool_typed<decltype(tag), decltype(cl)::value>(out, input); });
  });
}

KernelRegistrar<MaxPool2dFn> reg_max(max_pool2d_stub, kCPU, &max_pool_kernel);
KernelRegistrar<MaxPool2dBackwardFn> reg_max_backward(max_pool2d_backward_stub, kCPU,
                                                      &max_pool_backward_kernel);
KernelRegistrar<AvgPool2dFn> reg_avg(avg_pool2d_stub, kCPU, &avg_pool_kernel);
KernelRegistrar<AdaptiveAvgPool2dFn> reg_adaptive(adaptive_avg_pool2d_stub, kCPU, &adaptive_avg_pool_kernel);

}  // namespace
}  // namespace ember::cpu
