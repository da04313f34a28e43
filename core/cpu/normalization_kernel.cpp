// CPU kernels of the normalization family: fused layer_norm and its backward, per-row moments
// and the per-channel affine map group_norm finishes with, batch_norm's statistics, elementwise
// map and backward. Statistics use two passes (mean, then squares of x - mean), which stays
// accurate when |mean| >> std.
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
    const C* w =
        weight.defined() ? load_compute<C>(weight.data_ptr(), weight.dtype(), N, wbuf.data()) : nullptr;
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
    ConstArrayMap<C> w(
        weight.defined() ? load_compute<C>(weight.data_ptr(), weight.dtype(), N, wbuf.data()) : wbuf.data(),
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

// --- batch_norm: x [A, C, B] contiguous (B = 1 for channels-last). ---

// Slabs of x per fixed chunk (not one per thread, so sums do not depend on the thread count).
int64_t slab_chunk(const Tensor& x) { return rows_per_task(x.size(1) * x.size(2)); }

// Visits x (with y and out of its shape and dtype, either undefined) chunk by chunk as Eigen
// [C, n] arrays: f(k, xa, ya, oa) for chunk k, with a whole chunk as one column-major block when
// B = 1 (a column per row of x), else one row-major [C, B] slab at a time. ya is xa when y is
// undefined; oa, when out is defined, is stored to it afterwards.
template <class C, class F>
void for_each_channel_block(const Tensor& x, const Tensor& y, const Tensor& out, const F& f) {
  const int64_t A = x.size(0), Cn = x.size(1), B = x.size(2), chunk = slab_chunk(x);
  const ScalarType dt = x.dtype();
  const int64_t block = B == 1 ? chunk * Cn : Cn * B;
  parallel_for(0, (A + chunk - 1) / chunk, 1, [&](int64_t b, int64_t e) {
    std::vector<C> xb(dt == dtype_of<C> ? 0 : block), yb(y.defined() ? xb.size() : 0),
        ob(out.defined() ? xb.size() : 0);
    auto run = [&]<int kOrder>(int64_t k, int64_t off, int64_t cols) {
      using Arr = Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic, kOrder>;
      const int64_t n = Cn * cols;
      Eigen::Map<const Arr> xa(load_compute<C>(byte_ptr(x, off), dt, n, xb.data()), Cn, cols);
      Eigen::Map<const Arr> ya(y.defined() ? load_compute<C>(byte_ptr(y, off), dt, n, yb.data()) : xa.data(),
                               Cn, cols);
      C* op = out.defined() ? out_compute<C>(byte_ptr(out, off), dt, ob.data()) : nullptr;
      Eigen::Map<Arr> oa(op, Cn, op ? cols : 0);
      f(k, xa, ya, oa);
      if (op) store_compute<C>(op, byte_ptr(out, off), dt, n);
    };
    for (int64_t k = b; k < e; ++k) {
      const int64_t a0 = k * chunk, a1 = std::min(A, a0 + chunk);
      if (B == 1)
        run.template operator()<Eigen::ColMajor>(k, a0 * Cn, a1 - a0);
      else
        for (int64_t a = a0; a < a1; ++a) run.template operator()<Eigen::RowMajor>(k, a * Cn * B, B);
    }
  });
}

// K per-channel sums over A and B, accumulated in double as [C, K]: f(p, xa, ya) adds a block's
// sums into p's K columns (its chunk's partial sums, added in order at the end).
template <int K, class C, class F>
Eigen::ArrayXXd channel_sums(const Tensor& x, const Tensor& y, const F& f) {
  const int64_t Cn = x.size(1), chunks = (x.size(0) + slab_chunk(x) - 1) / slab_chunk(x);
  Eigen::ArrayXXd partial = Eigen::ArrayXXd::Zero(Cn, K * chunks);
  for_each_channel_block<C>(x, y, Tensor(), [&](int64_t k, const auto& xa, const auto& ya, auto&) {
    f(partial.middleCols(k * K, K), xa, ya);
  });
  Eigen::ArrayXXd sums = Eigen::ArrayXXd::Zero(Cn, K);
  for (int64_t k = 0; k < chunks; ++k) sums += partial.middleCols(k * K, K);
  return sums;
}

// A [C] tensor of any floating dtype as C values; `fill` for an undefined one.
template <class C>
ArrayX<C> load_channels(const Tensor& t, int64_t n, C fill) {
  ArrayX<C> v = ArrayX<C>::Constant(n, fill);
  if (t.defined())
    load_as<C>(static_cast<const char*>(t.data_ptr()), static_cast<int64_t>(t.element_size()), t.dtype(), n,
               v.data());
  return v;
}

template <class C>
void store_channels(const Tensor& t, const ArrayX<C>& v) {
  if (t.defined())
    store_as<C>(v.data(), static_cast<char*>(t.data_ptr()), static_cast<int64_t>(t.element_size()), t.dtype(),
                v.size());
}

void batch_norm_stats_kernel(const Tensor& mean, const Tensor& invstd, const Tensor& running_mean,
                             const Tensor& running_var, const Tensor& x, double momentum, double eps) {
  const int64_t Cn = mean.size(0);
  visit_float_compute(mean.dtype(), [&](auto tag) {
    using C = decltype(tag);
    ArrayX<C> mu, var;
    if (!x.defined()) {
      mu = load_channels<C>(running_mean, Cn, 0);
      var = load_channels<C>(running_var, Cn, 0);
    } else {
      const double count = static_cast<double>(x.size(0) * x.size(2));
      mu = (channel_sums<1, C>(x, {},
                               [](auto p, const auto& xa, const auto&) {
                                 p.col(0) += xa.rowwise().sum().template cast<double>();
                               })
                .col(0) /
            count)
               .template cast<C>();
      var = (channel_sums<1, C>(x, {},
                                [&](auto p, const auto& xa, const auto&) {
                                  p.col(0) +=
                                      (xa.colwise() - mu).square().rowwise().sum().template cast<double>();
                                })
                 .col(0) /
             count)
                .template cast<C>();
      if (running_mean.defined()) {
        const C m = static_cast<C>(momentum), unbiased = static_cast<C>(count / (count - 1));
        store_channels<C>(running_mean, (1 - m) * load_channels<C>(running_mean, Cn, 0) + m * mu);
        store_channels<C>(running_var, (1 - m) * load_channels<C>(running_var, Cn, 0) + m * unbiased * var);
      }
    }
    ArrayMap<C>(mean.data_ptr<C>(), Cn) = mu;
    ArrayMap<C>(invstd.data_ptr<C>(), Cn) = (var + static_cast<C>(eps)).sqrt().inverse();
  });
}

void batch_norm_elemt_kernel(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                             const Tensor& weight, const Tensor& bias, const Tensor& residual, bool relu) {
  const int64_t Cn = mean.size(0);
  visit_float_compute(mean.dtype(), [&](auto tag) {
    using C = decltype(tag);
    ConstArrayMap<C> mu(mean.data_ptr<C>(), Cn);
    const ArrayX<C> scale = ConstArrayMap<C>(invstd.data_ptr<C>(), Cn) * load_channels<C>(weight, Cn, 1);
    const ArrayX<C> shift = load_channels<C>(bias, Cn, 0);
    const bool add = residual.defined();
    for_each_channel_block<C>(x, residual, out, [&](int64_t, const auto& xa, const auto& ra, auto& oa) {
      oa = ((xa.colwise() - mu).colwise() * scale).colwise() + shift;
      if (add) oa += ra;
      if (relu) oa = (oa <= C(0)).select(C(0), oa);
    });
  });
}

// dy where batch_norm_relu's forward output was positive (batch_norm_elemt_kernel's arithmetic,
// in its order; CMake builds this file with -ffp-contract=off, so the values are the forward's), else 0.
template <class C>
struct ReluMask {
  ConstArrayMap<C> mu;
  ArrayX<C> scale, shift;
  C bound;

  ReluMask(const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias, ScalarType dt)
      : mu(mean.data_ptr<C>(), mean.size(0)),
        scale(ConstArrayMap<C>(invstd.data_ptr<C>(), mean.size(0)) *
              load_channels<C>(weight, mean.size(0), 1)),
        shift(load_channels<C>(bias, mean.size(0), 0)),
        bound(static_cast<C>(relu_zero_bound(dt))) {}

  // In ga's storage order, so that the sums that read it add in the unmasked path's order.
  template <class G, class X>
  typename G::PlainObject operator()(const G& ga, const X& xa) const {
    return ((((xa.colwise() - mu).colwise() * scale).colwise() + shift) > bound).select(ga, C(0));
  }
};

void batch_norm_backward_reduce_kernel(const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& dw,
                                       const Tensor& db, const Tensor& dy, const Tensor& x,
                                       const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                       const Tensor& bias, bool relu) {
  const int64_t Cn = mean.size(0);
  visit_float_compute(mean.dtype(), [&](auto tag) {
    using C = decltype(tag);
    ConstArrayMap<C> mu(mean.data_ptr<C>(), Cn);
    const ReluMask<C> mask(mean, invstd, weight, bias, x.dtype());
    Eigen::ArrayXXd sums = channel_sums<2, C>(dy, x, [&](auto p, const auto& ga, const auto& xa) {
      auto add = [&](const auto& g) {
        p.col(0) += g.rowwise().sum().template cast<double>();
        p.col(1) += (g * (xa.colwise() - mu)).rowwise().sum().template cast<double>();
      };
      if (relu)
        add(mask(ga, xa));
      else
        add(ga);
    });
    ArrayX<C> sdy = sums.col(0).template cast<C>(), sdx = sums.col(1).template cast<C>();
    ArrayMap<C>(sum_dy.data_ptr<C>(), Cn) = sdy;
    ArrayMap<C>(sum_dy_xmu.data_ptr<C>(), Cn) = sdx;
    store_channels<C>(dw, sdx * ConstArrayMap<C>(invstd.data_ptr<C>(), Cn));
    store_channels<C>(db, sdy);
  });
}

void batch_norm_backward_elemt_kernel(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& mean,
                                      const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                                      const Tensor& sum_dy, const Tensor& sum_dy_xmu, double inv_count,
                                      bool relu) {
  const int64_t Cn = mean.size(0);
  visit_float_compute(mean.dtype(), [&](auto tag) {
    using C = decltype(tag);
    ConstArrayMap<C> mu(mean.data_ptr<C>(), Cn), is(invstd.data_ptr<C>(), Cn);
    const ArrayX<C> scale = is * load_channels<C>(weight, Cn, 1);
    const ReluMask<C> mask(mean, invstd, weight, bias, x.dtype());
    // dx = (dy - mean(dy) - (x - mean) * proj) * scale, proj = invstd^2 * mean(dy * (x - mean)),
    // or dy * scale through constant statistics.
    const bool stats = sum_dy.defined();
    const C k = static_cast<C>(inv_count);
    const ArrayX<C> mean_dy = stats ? ArrayX<C>(ConstArrayMap<C>(sum_dy.data_ptr<C>(), Cn) * k) : ArrayX<C>();
    const ArrayX<C> proj =
        stats ? ArrayX<C>(is.square() * ConstArrayMap<C>(sum_dy_xmu.data_ptr<C>(), Cn) * k) : ArrayX<C>();
    for_each_channel_block<C>(
        dy, stats || relu ? x : Tensor(), dx, [&](int64_t, const auto& ga, const auto& xa, auto& oa) {
          auto write = [&](const auto& g) {
            if (stats)
              oa = ((g.colwise() - mean_dy) - (xa.colwise() - mu).colwise() * proj).colwise() * scale;
            else
              oa = g.colwise() * scale;
          };
          if (relu)
            write(mask(ga, xa));
          else
            write(ga);
        });
  });
}

void channel_affine_kernel(const Tensor& out, const Tensor& x, const Tensor& scale, const Tensor& shift) {
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
KernelRegistrar<ChannelAffineFn> reg_channel_affine(channel_affine_stub, kCPU, &channel_affine_kernel);
KernelRegistrar<BatchNormStatsFn> reg_batch_norm_stats(batch_norm_stats_stub, kCPU, &batch_norm_stats_kernel);
KernelRegistrar<BatchNormElemtFn> reg_batch_norm_elemt(batch_norm_elemt_stub, kCPU, &batch_norm_elemt_kernel);
KernelRegistrar<BatchNormBackwardReduceFn> reg_batch_norm_backward_reduce(batch_norm_backward_reduce_stub,
                                                                          kCPU,
                                                                          &batch_norm_backward_reduce_kernel);
KernelRegistrar<BatchNormBackwardElemtFn> reg_batch_norm_backward_elemt(batch_norm_backward_elemt_stub, kCPU,
                                                                        &batch_norm_backward_elemt_kernel);

}  // namespace
}  // namespace ember::cpu
