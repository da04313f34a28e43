// CPU kernels of dropout_add_layer_norm: per row, the keep mask (stored as bits for the backward),
// the sum and its statistics in the compute type, then the normalized row; the backward reads the
// mask's bits and adds the weight's and bias's column sums per fixed chunk of rows (the result
// does not depend on the thread count).
#include <cmath>
#include <vector>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/dropout_add_layer_norm.h"
#include "ember/core/ops/dropout_functors.h"

namespace ember::cpu {
namespace {

constexpr int64_t kGrainElems = 32768;

int64_t rows_per_task(int64_t n) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(n, 1)); }

// One row's s = residual + keep * x * scale, in C. The forward (kReadBits false) draws keep and
// writes it to `bits` when defined; the backward reads it from there.
template <class C, bool kReadBits>
struct RowSum {
  const Tensor &x, &residual;
  bool dropout;
  double p;
  PhiloxState rng;
  const Tensor& bits;
  int64_t N;
  std::vector<C> xbuf = std::vector<C>(N), rbuf = std::vector<C>(N);
  std::vector<char> keep = std::vector<char>(N, 1);

  void operator()(int64_t r, ArrayX<C>& s) {
    ConstArrayMap<C> xr(load_compute<C>(byte_ptr(x, r * N), x.dtype(), N, xbuf.data()), N);
    ConstArrayMap<C> res(load_compute<C>(byte_ptr(residual, r * N), residual.dtype(), N, rbuf.data()), N);
    if (!dropout) {
      s = res + xr;
      return;
    }
    const int64_t bytes = (N + 7) / 8;
    uint8_t* row_bits = bits.defined() ? static_cast<uint8_t*>(bits.data_ptr()) + r * bytes : nullptr;
    if (kReadBits) {
      for (int64_t j = 0; j < N; ++j) keep[j] = (row_bits[j / 8] >> (j % 8)) & 1;
    } else {
      ops::DropoutMaskDraw(rng, p).range(r * N, N, reinterpret_cast<bool*>(keep.data()));
      if (row_bits) {
        std::fill(row_bits, row_bits + bytes, uint8_t{0});
        for (int64_t j = 0; j < N; ++j) row_bits[j / 8] |= static_cast<uint8_t>(keep[j] != 0) << (j % 8);
      }
    }
    const auto scale = static_cast<C>(ops::dropout_scale(p));
    for (int64_t j = 0; j < N; ++j)
      s[j] = res[j] + ops::MaskedScale<C>{scale}(static_cast<C>(keep[j]), xr[j]);
  }
};

template <class C>
const C* param_or(const Tensor& t, int64_t N, std::vector<C>& buf) {
  return t.defined() ? load_compute<C>(t.data_ptr(), t.dtype(), N, buf.data()) : nullptr;
}

void forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& bits,
                    const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                    bool dropout, double p, PhiloxState rng, double eps) {
  const int64_t M = x.size(0), N = x.size(1);
  visit_float_compute(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    std::vector<C> wbuf(N), bbuf(N);
    const C* w = param_or(weight, N, wbuf);
    const C* b = param_or(bias, N, bbuf);
    parallel_for(0, M, rows_per_task(N), [&](int64_t rb, int64_t re) {
      RowSum<C, false> row{x, residual, dropout, p, rng, bits, N};
      ArrayX<C> s(N);
      std::vector<C> obuf(N);
      for (int64_t r = rb; r < re; ++r) {
        row(r, s);
        const C mu = s.sum() / static_cast<C>(N);
        const C rs = C(1) / std::sqrt((s - mu).square().sum() / static_cast<C>(N) + static_cast<C>(eps));
        C* o = out_compute<C>(byte_ptr(out, r * N), out.dtype(), obuf.data());
        ArrayMap<C> y(o, N);
        y = (s - mu) * rs;
        if (w) y *= ConstArrayMap<C>(w, N);
        if (b) y += ConstArrayMap<C>(b, N);
        store_compute<C>(o, byte_ptr(out, r * N), out.dtype(), N);
        mean.data_ptr<C>()[r] = mu;
        rstd.data_ptr<C>()[r] = rs;
      }
    });
  });
}

void backward_kernel(const Tensor& dx, const Tensor& dres, const Tensor& dw, const Tensor& db,
                     const Tensor& dx_sums, const Tensor& gy, const Tensor& x, const Tensor& residual,
                     const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bits,
                     double p) {
  constexpr int64_t kMaxChunks = 64;
  const int64_t M = x.size(0), N = x.size(1);
  const int64_t chunk = std::max(rows_per_task(N), (M + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (M + chunk - 1) / chunk;
  const bool params = dw.defined() || db.defined();
  visit_float_compute(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* mp = mean.data_ptr<C>();
    const C* rp = rstd.data_ptr<C>();
    const bool dropout = bits.defined();
    const auto scale = static_cast<C>(dropout ? ops::dropout_scale(p) : 1.0);
    std::vector<C> wbuf(N);
    const C* w = param_or(weight, N, wbuf);
    Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic> pw, pb, px;  // [N, chunks]
    if (params) pw.setZero(N, chunks), pb.setZero(N, chunks);
    if (dx_sums.defined()) px.setZero(N, chunks);
    parallel_for(0, chunks, 1, [&](int64_t kb, int64_t ke) {
      RowSum<C, true> row{x, residual, dropout, p, PhiloxState{}, bits, N};
      ArrayX<C> s(N), xhat(N), gxhat(N), ds(N);
      std::vector<C> gbuf(N), obuf(N);
      for (int64_t k = kb; k < ke; ++k) {
        for (int64_t r = k * chunk; r < std::min(M, (k + 1) * chunk); ++r) {
          row(r, s);
          ConstArrayMap<C> g(load_compute<C>(byte_ptr(gy, r * N), gy.dtype(), N, gbuf.data()), N);
          xhat = (s - mp[r]) * rp[r];
          if (params) {
            pw.col(k) += g * xhat;
            pb.col(k) += g;
          }
          if (!dx.defined() && !dres.defined()) continue;
          gxhat = w ? (g * ConstArrayMap<C>(w, N)).eval() : ArrayX<C>(g);
          ds = rp[r] * (gxhat - gxhat.mean() - xhat * (gxhat * xhat).mean());
          if (dres.defined()) store_compute<C>(ds.data(), byte_ptr(dres, r * N), dres.dtype(), N);
          if (!dx.defined()) continue;
          C* o = out_compute<C>(byte_ptr(dx, r * N), dx.dtype(), obuf.data());
          for (int64_t j = 0; j < N; ++j)
            o[j] = ops::MaskedScale<C>{scale}(static_cast<C>(row.keep[j]), ds[j]);
          store_compute<C>(o, byte_ptr(dx, r * N), dx.dtype(), N);
          // The sums of dx as stored (rounded to its dtype), for the linear before it.
          if (dx_sums.defined())
            px.col(k) +=
                ConstArrayMap<C>(load_compute<C>(byte_ptr(dx, r * N), dx.dtype(), N, obuf.data()), N);
        }
      }
    });
    for (auto [out, part] : {std::pair{&dw, &pw}, std::pair{&db, &pb}, std::pair{&dx_sums, &px}}) {
      if (!out->defined()) continue;
      const ArrayX<C> sum = part->rowwise().sum();
      store_compute<C>(sum.data(), out->data_ptr(), out->dtype(), N);
    }
  });
}

KernelRegistrar<DropoutAddLayerNormFn> reg_forward(dropout_add_layer_norm_stub, kCPU, &forward_kernel);
KernelRegistrar<DropoutAddLayerNormBackwardFn> reg_backward(dropout_add_layer_norm_backward_stub, kCPU,
                                                            &backward_kernel);

}  // namespace
}  // namespace ember::cpu
