// CPU kernels of 2D pooling: one pass per output cell over its window, parallel over planes.
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

// Runs f(plane) over the N * C planes of out, about 32K window reads per task.
template <class F>
void for_each_plane(const Tensor& out, int64_t reads_per_cell, const F& f) {
  const int64_t planes = out.size(0) * out.size(1);
  const int64_t cost = std::max<int64_t>(1, out.size(2) * out.size(3) * reads_per_cell);
  parallel_for(0, planes, std::max<int64_t>(1, 32768 / cost), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

template <class T>
void max_pool_typed(const Tensor& out, const Tensor& indices, const Tensor& input,
                    const Pool2dParams& p) {
  using A = Acc<T>;
  const int64_t h = input.size(2), w = input.size(3), ho = out.size(2), wo = out.size(3);
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  int64_t* pi = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
  for_each_plane(out, p.kernel[0] * p.kernel[1], [&](int64_t plane) {
    const T* x = in + plane * h * w;
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow) {
        A best = std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                      : std::numeric_limits<A>::lowest();
        int64_t arg = -1;
        for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
          if (ih < 0 || ih >= h) continue;
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (iw < 0 || iw >= w) continue;
            const A v = static_cast<A>(x[ih * w + iw]);
            bool nan = false;
            if constexpr (std::is_floating_point_v<A>) nan = std::isnan(v);
            if (arg < 0 || v > best || nan) best = v, arg = ih * w + iw;  // NaN wins, as in PyTorch
          }
        }
        const int64_t o = (plane * ho + oh) * wo + ow;
        po[o] = static_cast<T>(best);
        if (pi) pi[o] = arg;
      }
  });
}

template <class T>
void avg_pool_typed(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  using A = Acc<T>;
  const int64_t h = input.size(2), w = input.size(3), ho = out.size(2), wo = out.size(3);
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  for_each_plane(out, p.kernel[0] * p.kernel[1], [&](int64_t plane) {
    const T* x = in + plane * h * w;
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow) {
        // The window, clipped first to the padded input (count_include_pad's size), then to it.
        int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
        int64_t h1 = std::min(h0 + p.kernel[0], h + p.padding[0]);
        int64_t w1 = std::min(w0 + p.kernel[1], w + p.padding[1]);
        const int64_t padded_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, h), w1 = std::min(w1, w);
        A sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<A>(x[ih * w + iw]);
        const int64_t size = std::max<int64_t>(0, h1 - h0) * std::max<int64_t>(0, w1 - w0);
        const int64_t divisor = p.divisor ? p.divisor : p.count_include_pad ? padded_size : size;
        po[(plane * ho + oh) * wo + ow] =
            static_cast<T>(size > 0 ? sum / static_cast<A>(divisor) : A(0));
      }
  });
}

template <class T>
void adaptive_avg_pool_typed(const Tensor& out, const Tensor& input) {
  using A = Acc<T>;
  const int64_t h = input.size(2), w = input.size(3), ho = out.size(2), wo = out.size(3);
  const T* in = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const int64_t reads = ((h + ho - 1) / ho + 1) * ((w + wo - 1) / wo + 1);
  for_each_plane(out, reads, [&](int64_t plane) {
    const T* x = in + plane * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      const int64_t h0 = oh * h / ho, h1 = ((oh + 1) * h + ho - 1) / ho;
      for (int64_t ow = 0; ow < wo; ++ow) {
        const int64_t w0 = ow * w / wo, w1 = ((ow + 1) * w + wo - 1) / wo;
        A sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<A>(x[ih * w + iw]);
        po[(plane * ho + oh) * wo + ow] =
            static_cast<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
      }
    }
  });
}

void max_pool_kernel(const Tensor& out, const Tensor& indices, const Tensor& input,
                     const Pool2dParams& p) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      EMBER_CHECK(false, "max_pool2d: no CPU kernel for bool");
    else
      max_pool_typed<T>(out, indices, input, p);
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

void avg_pool_kernel(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  visit_float("avg_pool2d", out.dtype(),
              [&](auto tag) { avg_pool_typed<decltype(tag)>(out, input, p); });
}

void adaptive_avg_pool_kernel(const Tensor& out, const Tensor& input) {
  visit_float("adaptive_avg_pool2d", out.dtype(),
              [&](auto tag) { adaptive_avg_pool_typed<decltype(tag)>(out, input); });
}

KernelRegistrar<MaxPool2dFn> reg_max(max_pool2d_stub, kCPU, &max_pool_kernel);
KernelRegistrar<AvgPool2dFn> reg_avg(avg_pool2d_stub, kCPU, &avg_pool_kernel);
KernelRegistrar<AdaptiveAvgPool2dFn> reg_adaptive(adaptive_avg_pool2d_stub, kCPU,
                                                  &adaptive_avg_pool_kernel);

}  // namespace
}  // namespace ember::cpu
