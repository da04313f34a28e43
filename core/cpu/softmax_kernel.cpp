// Fused, numerically stable (log_)softmax and its backward: x viewed as [outer, K, inner], reduced
// over K. The forward finds the max in one pass, sums exp(x - max) in one and writes in one; the
// backward sums in one pass and writes in one. f16/bf16 compute in float.
#include <cmath>
#include <limits>
#include <vector>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/softmax.h"
#include "ember/core/shape.h"

namespace ember::cpu {
namespace {

constexpr int64_t kGrainElems = 16384;  // elements per parallel task, about L1/L2 sized
constexpr int64_t kColumnBlock = 256;   // columns of the inner dim handled together

// inner == 1: each row of K elements is contiguous.
template <class C>
void softmax_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t K, bool log) {
  ScalarType dt = in.dtype();
  parallel_for(0, outer, std::max<int64_t>(1, kGrainElems / K), [&](int64_t b, int64_t e) {
    std::vector<C> ibuf(dt == dtype_of<C> ? 0 : K), obuf(ibuf.size());
    for (int64_t r = b; r < e; ++r) {
      ConstArrayMap<C> x(load_compute<C>(byte_ptr(in, r * K), dt, K, ibuf.data()), K);
      C* y_ptr = out_compute<C>(byte_ptr(out, r * K), dt, obuf.data());
      ArrayMap<C> y(y_ptr, K);
      C m = x.maxCoeff();
      if (log) {
        y = x - (m + std::log(exp_ftz(x - m).sum()));
      } else {
        y = exp_ftz(x - m);
        y *= C(1) / y.sum();
      }
      store_compute<C>(y_ptr, byte_ptr(out, r * K), dt, K);
    }
  });
}

// inner > 1: walk K rows of a block of w contiguous columns, keeping per-column max and sum.
// softmax in the compute dtype stores exp(x - max) in the output, then scales it in place;
// otherwise the last pass recomputes it.
template <class C>
void softmax_columns(const Tensor& out, const Tensor& in, int64_t outer, int64_t K, int64_t inner,
                     bool log) {
  ScalarType dt = in.dtype();
  bool reuse_exp = !log && dt == dtype_of<C>;
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  int64_t grain = std::max<int64_t>(1, kGrainElems / (K * std::min(inner, kColumnBlock)));
  parallel_for(0, outer * blocks, grain, [&](int64_t b, int64_t e) {
    std::vector<C> ibuf(dt == dtype_of<C> ? 0 : kColumnBlock), obuf(ibuf.size());
    ArrayX<C> m(kColumnBlock), s(kColumnBlock);
    for (int64_t task = b; task < e; ++task) {
      int64_t o = task / blocks, j0 = task % blocks * kColumnBlock;
      int64_t w = std::min(kColumnBlock, inner - j0);
      auto offset = [&](int64_t k) { return (o * K + k) * inner + j0; };
      auto row = [&](int64_t k) {
        return ConstArrayMap<C>(load_compute<C>(byte_ptr(in, offset(k)), dt, w, ibuf.data()), w);
      };
      auto mh = m.head(w);
      auto sh = s.head(w);
      mh.setConstant(-std::numeric_limits<C>::infinity());
      for (int64_t k = 0; k < K; ++k) mh = mh.max(row(k));
      sh.setZero();
      for (int64_t k = 0; k < K; ++k) {
        if (reuse_exp) {
          ArrayMap<C> y(reinterpret_cast<C*>(byte_ptr(out, offset(k))), w);
          y = exp_ftz(row(k) - mh);
          sh += y;
        } else {
          sh += exp_ftz(row(k) - mh);
        }
      }
      if (log)
        sh = mh + sh.log();
      else
        sh = sh.inverse();
      for (int64_t k = 0; k < K; ++k) {
        C* y_ptr = out_compute<C>(byte_ptr(out, offset(k)), dt, obuf.data());
        ArrayMap<C> y(y_ptr, w);
        if (log)
          y = row(k) - sh;
        else if (reuse_exp)
          y *= sh;
        else
          y = exp_ftz(row(k) - mh) * sh;
        store_compute<C>(y_ptr, byte_ptr(out, offset(k)), dt, w);
      }
    }
  });
}

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  IntArrayRef sizes = in.sizes();
  int64_t K = in.dim() == 0 ? 1 : sizes[dim];
  int64_t outer = numel_of(IntArrayRef(sizes.data(), static_cast<size_t>(dim)));
  int64_t inner = in.numel() / (outer * K);
  visit_float_compute(in.dtype(), [&](auto tag) {
    using C = decltype(tag);
    if (inner == 1)
      softmax_rows<C>(out, in, outer, K, log);
    else
      softmax_columns<C>(out, in, outer, K, inner, log);
  });
}

// --- Backward: gx = y * (gy - sum(gy * y)) for softmax, gy - exp(y) * sum(gy) for log_softmax,
// one pass for the sum and one to write. ---

// inner == 1: rows of K contiguous elements.
template <class C>
void softmax_backward_rows(const Tensor& gx, const Tensor& gy, const Tensor& y, int64_t outer, int64_t K,
                           bool log) {
  ScalarType dt = y.dtype();
  parallel_for(0, outer, std::max<int64_t>(1, kGrainElems / K), [&](int64_t b, int64_t e) {
    std::vector<C> gbuf(dt == dtype_of<C> ? 0 : K), ybuf(gbuf.size()), obuf(gbuf.size());
    for (int64_t r = b; r < e; ++r) {
      ConstArrayMap<C> g(load_compute<C>(byte_ptr(gy, r * K), dt, K, gbuf.data()), K);
      ConstArrayMap<C> yr(load_compute<C>(byte_ptr(y, r * K), dt, K, ybuf.data()), K);
      C* o_ptr = out_compute<C>(byte_ptr(gx, r * K), dt, obuf.data());
      ArrayMap<C> o(o_ptr, K);
      if (log)
        o = g - exp_ftz(yr) * g.sum();
      else
        o = yr * (g - (g * yr).sum());
      store_compute<C>(o_ptr, byte_ptr(gx, r * K), dt, K);
    }
  });
}

// inner > 1: per block of w contiguous columns, the sums over K rows, then the K output rows.
template <class C>
void softmax_backward_columns(const Tensor& gx, const Tensor& gy, const Tensor& y, int64_t outer, int64_t K,
                              int64_t inner, bool log) {
  ScalarType dt = y.dtype();
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  int64_t grain = std::max<int64_t>(1, kGrainElems / (K * std::min(inner, kColumnBlock)));
  parallel_for(0, outer * blocks, grain, [&](int64_t b, int64_t e) {
    std::vector<C> gbuf(dt == dtype_of<C> ? 0 : kColumnBlock), ybuf(gbuf.size()), obuf(gbuf.size());
    ArrayX<C> s(kColumnBlock);
    for (int64_t task = b; task < e; ++task) {
      int64_t o = task / blocks, j0 = task % blocks * kColumnBlock;
      int64_t w = std::min(kColumnBlock, inner - j0);
      auto offset = [&](int64_t k) { return (o * K + k) * inner + j0; };
      auto g = [&](int64_t k) {
        return ConstArrayMap<C>(load_compute<C>(byte_ptr(gy, offset(k)), dt, w, gbuf.data()), w);
      };
      auto yr = [&](int64_t k) {
        return ConstArrayMap<C>(load_compute<C>(byte_ptr(y, offset(k)), dt, w, ybuf.data()), w);
      };
      auto sh = s.head(w);
      sh.setZero();
      for (int64_t k = 0; k < K; ++k) {
        if (log)
          sh += g(k);
        else
          sh += g(k) * yr(k);
      }
      for (int64_t k = 0; k < K; ++k) {
        C* o_ptr = out_compute<C>(byte_ptr(gx, offset(k)), dt, obuf.data());
        ArrayMap<C> out(o_ptr, w);
        if (log)
          out = g(k) - exp_ftz(yr(k)) * sh;
        else
          out = yr(k) * (g(k) - sh);
        store_compute<C>(o_ptr, byte_ptr(gx, offset(k)), dt, w);
      }
    }
  });
}

void softmax_backward_kernel(const Tensor& gx, const Tensor& gy, const Tensor& y, int64_t dim, bool log) {
  IntArrayRef sizes = y.sizes();
  int64_t K = y.dim() == 0 ? 1 : sizes[dim];
  int64_t outer = numel_of(IntArrayRef(sizes.data(), static_cast<size_t>(dim)));
  int64_t inner = y.numel() / (outer * K);
  visit_float_compute(y.dtype(), [&](auto tag) {
    using C = decltype(tag);
    if (inner == 1)
      softmax_backward_rows<C>(gx, gy, y, outer, K, log);
    else
      softmax_backward_columns<C>(gx, gy, y, outer, K, inner, log);
  });
}

KernelRegistrar<SoftmaxFn> reg(softmax_stub, kCPU, &softmax_kernel);
KernelRegistrar<SoftmaxBackwardFn> reg_backward(softmax_backward_stub, kCPU, &softmax_backward_kernel);

}  // namespace
}  // namespace ember::cpu
