// CPU kernels of the normalization family: fused layer_norm and its backward, per-row and
// per-channel moments, and the per-channel affine map batch_norm and group_norm finish with.
// Statistics use two passes (mean, then squares of x - mean), which stays accurate when
// |mean| >> std.
#include <cmath>
#include <vector>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/normalization.h"

namespace ember::cpu {
namespace {

constexpr int64_t kGrainElems = 32768;

template <class C>
using RowMajor = Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class C>
using ConstRowMajorMap = Eigen::Map<const RowMajor<C>>;

int64_t rows_per_task(int64_t row_len) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(row_len, 1));
}

// Mean and 1/sqrt(biased variance + eps) of a row.
template <class C>
std::pair<C, C> mean_rstd(const ConstArrayMap<C>& x, double eps) {
  C n = static_cast<C>(x.size());
  C mean = x.sum() / n;
  C var = (x - mean).square().sum() / n;
  return {mean, C(1) / std::sqrt(var + static_cast<C>(eps))};
}

void layer_norm_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps) {
  int64_t M = x.size(0), N = x.size(1);
  ScalarType dt = x.dtype();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    C* mp = mean.data_ptr<C>();
    C* rp = rstd.data_ptr<C>();
    std::vector<C> wbuf(N), bbuf(N);  // the parameters in C, when they come in x's dtype
    const C* w = weight.defined() ? load_compute<C>(weight.data_ptr(), weight.dtype(), N, wbuf.data()) : nullptr;
    const C* bs = bias.defined() ? load_compute<C>(bias.data_ptr(), bias.dtype(), N, bbuf.data()) : nullptr;
    parallel_for(0, M, rows_per_task(N), [&](int64_t b, int64_t e) {
      std::vector<C> ibuf(dt == dtype_of<C> ? 0 : N), obuf(ibuf.size());
      for (int64_t r = b; r < e; ++r) {
        ConstArrayMap<C> xr(load_compute<C>(byte_ptr(x, r * N), dt, N, ibuf.data()), N);
        C* y_ptr = out_compute<C>(byte_ptr(out, r * N), dt, obuf.data());
        ArrayMap<C> y(y_ptr, N);
        auto [mu, rs] = mean_rstd(xr, eps);
        y = (xr - mu) * rs;
        if (w) y *= ConstArrayMap<C>(w, N);
        if (bs) y += ConstArrayMap<C>(bs, N);
        store_compute<C>(y_ptr, byte_ptr(out, r * N), dt, N);
        mp[r] = mu;
        rp[r] = rs;
      }
    });
  });
}

// Rows in fixed chunks (not one per thread, so the sums do not depend on the thread count): each
// chunk writes its rows of dx and adds gy * xhat and gy into its own column of the dw and db
// partial sums, which are then added in order.
void layer_norm_backward_kernel(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& gy,
                                const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                const Tensor& weight) {
  constexpr int64_t kMaxChunks = 64;
  int64_t M = x.size(0), N = x.size(1);
  int64_t chunk = std::max(rows_per_task(N), (M + kMaxChunks - 1) / kMaxChunks);
  int64_t chunks = (M + chunk - 1) / chunk;
  bool params = dw.defined() || db.defined();
  ScalarType dt = x.dtype();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    const C* mp = mean.data_ptr<C>();
    const C* rp = rstd.data_ptr<C>();
    ArrayX<C> wbuf = ArrayX<C>::Ones(N);  // the weight in C (ones without one)
    ConstArrayMap<C> w(weight.defined() ? load_compute<C>(weight.data_ptr(), weight.dtype(), N, wbuf.data())
                                        : wbuf.data(),
                       N);
    Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic> pw, pb;  // [N, chunks]
    if (params) pw.setZero(N, chunks), pb.setZero(N, chunks);
    parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
      std::vector<C> gbuf(dt == dtype_of<C> ? 0 : N), xbuf(gbuf.size()), obuf(gbuf.size());
      ArrayX<C> xhat(N), gxhat(N);
      for (int64_t k = b; k < e; ++k) {
        for (int64_t r = k * chunk; r < std::min(M, (k + 1) * chunk); ++r) {
          ConstArrayMap<C> g(load_compute<C>(byte_ptr(gy, r * N), dt, N, gbuf.data()), N);
          ConstArrayMap<C> xr(load_compute<C>(byte_ptr(x, r * N), dt, N, xbuf.data()), N);
          xhat = (xr - mp[r]) * rp[r];
          if (params) {
            pw.col(k) += g * xhat;
            pb.col(k) += g;
          }
          if (!dx.defined()) continue;
          gxhat = g * w;
          C* o_ptr = out_compute<C>(byte_ptr(dx, r * N), dt, obuf.data());
          ArrayMap<C>(o_ptr, N) = rp[r] * (gxhat - gxhat.mean() - xhat * (gxhat * xhat).mean());
          store_compute<C>(o_ptr, byte_ptr(dx, r * N), dt, N);
        }
      }
    });
    ArrayX<C> sum(N);
    for (auto [out, part] : {std::pair{&dw, &pw}, std::pair{&db, &pb}}) {
      if (!out->defined()) continue;
      sum = part->rowwise().sum();
      store_compute<C>(sum.data(), out->data_ptr(), out->dtype(), N);
    }
  });
}

void row_moments_kernel(const Tensor& mean, const Tensor& rstd, const Tensor& x, double eps) {
  int64_t R = x.size(0), K = x.size(1);
  ScalarType dt = x.dtype();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    C* mp = mean.data_ptr<C>();
    C* rp = rstd.data_ptr<C>();
    parallel_for(0, R, rows_per_task(K), [&](int64_t b, int64_t e) {
      std::vector<C> buf(dt == dtype_of<C> ? 0 : K);
      for (int64_t r = b; r < e; ++r) {
        ConstArrayMap<C> xr(load_compute<C>(byte_ptr(x, r * K), dt, K, buf.data()), K);
        std::tie(mp[r], rp[r]) = mean_rstd(xr, eps);
      }
    });
  });
}

// Per-channel sums over A and B of f(x[a] as a [C, B] array), accumulated in double: partial
// sums per fixed chunk of A, added in order, so the result does not depend on the thread count.
template <class C, class F>
Eigen::ArrayXd channel_sums(const Tensor& x, const F& f) {
  int64_t A = x.size(0), Cn = x.size(1), B = x.size(2);
  ScalarType dt = x.dtype();
  int64_t chunk = rows_per_task(Cn * B), chunks = (A + chunk - 1) / chunk;
  Eigen::ArrayXXd partial = Eigen::ArrayXXd::Zero(Cn, chunks);
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    std::vector<C> buf(dt == dtype_of<C> ? 0 : Cn * B);
    for (int64_t k = b; k < e; ++k) {
      for (int64_t a = k * chunk; a < std::min(A, (k + 1) * chunk); ++a) {
        ConstRowMajorMap<C> xa(load_compute<C>(byte_ptr(x, a * Cn * B), dt, Cn * B, buf.data()), Cn,
                               B);
        partial.col(k) += f(xa).rowwise().sum().template cast<double>();
      }
    }
  });
  return partial.rowwise().sum();
}

void channel_moments_kernel(const Tensor& mean, const Tensor& var, const Tensor& x) {
  double count = static_cast<double>(x.size(0) * x.size(2));
  visit_float_compute(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    ArrayX<C> mu =
        (channel_sums<C>(x, [](const auto& xa) { return xa; }) / count).template cast<C>();
    Eigen::ArrayXd sq =
        channel_sums<C>(x, [&](const auto& xa) { return (xa.colwise() - mu).square(); });
    ArrayMap<C>(mean.data_ptr<C>(), mu.size()) = mu;
    ArrayMap<C>(var.data_ptr<C>(), mu.size()) = (sq / count).template cast<C>();
  });
}

void channel_affine_kernel(const Tensor& out, const Tensor& x, const Tensor& scale,
                           const Tensor& shift) {
  int64_t A = x.size(0), Cn = x.size(1), B = x.size(2);
  ScalarType dt = x.dtype();
  // Tasks are blocks of cb channels of one a: [cb, B] contiguous.
  int64_t cb = std::min(Cn, rows_per_task(B)), blocks = (Cn + cb - 1) / cb;
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    using RowMajorMap = Eigen::Map<RowMajor<C>>;
    const C* sp = scale.data_ptr<C>();
    const C* hp = shift.data_ptr<C>();
    parallel_for(0, A * blocks, 1, [&](int64_t b, int64_t e) {
      std::vector<C> ibuf(dt == dtype_of<C> ? 0 : cb * B), obuf(ibuf.size());
      for (int64_t task = b; task < e; ++task) {
        int64_t a = task / blocks, c0 = task % blocks * cb, n = std::min(cb, Cn - c0);
        int64_t off = (a * Cn + c0) * B;
        ConstRowMajorMap<C> xa(load_compute<C>(byte_ptr(x, off), dt, n * B, ibuf.data()), n, B);
        C* y_ptr = out_compute<C>(byte_ptr(out, off), dt, obuf.data());
        RowMajorMap y(y_ptr, n, B);
        y = (xa.colwise() * ConstArrayMap<C>(sp + c0, n)).colwise() + ConstArrayMap<C>(hp + c0, n);
        store_compute<C>(y_ptr, byte_ptr(out, off), dt, n * B);
      }
    });
  });
}

KernelRegistrar<LayerNormFn> reg_layer_norm(layer_norm_stub, kCPU, &layer_norm_kernel);
KernelRegistrar<LayerNormBackwardFn> reg_layer_norm_backward(layer_norm_backward_stub, kCPU,
                                                             &layer_norm_backward_kernel);
KernelRegistrar<RowMomentsFn> reg_row_moments(row_moments_stub, kCPU, &row_moments_kernel);
KernelRegistrar<ChannelMomentsFn> reg_channel_moments(channel_moments_stub, kCPU,
                                                      &channel_moments_kernel);
KernelRegistrar<ChannelAffineFn> reg_channel_affine(channel_affine_stub, kCPU,
                                                    &channel_affine_kernel);

}  // namespace
}  // namespace ember::cpu
