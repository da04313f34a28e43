// CPU kernels of the loss family: a deterministic sum, nll with class weights, ignore_index and
// the label-smoothing term, cross entropy against class probabilities, BCE with logits, and the
// fused forward and gradient of cross entropy with class targets.
#include <cmath>
#include <limits>
#include <vector>

#include "ember/core/cpu/nn_kernel_util.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/loss_functors.h"

namespace ember::cpu {
namespace {

// Sums fixed blocks in double, then the block sums in order: the same bits for any thread count.
void loss_sum_kernel(const Tensor& out, const Tensor& in) {
  constexpr int64_t kBlock = 8192;
  int64_t n = in.numel(), blocks = (n + kBlock - 1) / kBlock;
  visit_float_compute(in.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* p = in.data_ptr<C>();
    std::vector<double> partial(blocks);
    parallel_for(0, blocks, 4, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        int64_t len = std::min(kBlock, n - k * kBlock);
        partial[k] = ConstArrayMap<C>(p + k * kBlock, len).template cast<double>().sum();
      }
    });
    double s = 0;
    for (double v : partial) s += v;
    *out.data_ptr<C>() = static_cast<C>(s);
  });
}

void check_targets(const char* op, const Tensor& target, int64_t nc, int64_t ignore_index) {
  const int64_t* t = target.data_ptr<int64_t>();
  for (int64_t i = 0, n = target.numel(); i < n; ++i)
    EMBER_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < nc), op, ": target ", t[i],
                " is out of bounds for ", nc, " classes");
}

void nll_loss_kernel(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth, const Tensor& logp,
                     const Tensor& target, const Tensor& weight, int64_t ignore_index, const char* op) {
  int64_t nc = logp.size(1), D = logp.size(2), n = target.numel();
  check_targets(op, target, nc, ignore_index);
  const int64_t* t = target.data_ptr<int64_t>();
  visit_float_compute(logp.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* lp = logp.data_ptr<C>();
    const C* w = weight.defined() ? weight.data_ptr<C>() : nullptr;
    C* lo = loss.data_ptr<C>();
    C* tw = total_weight.data_ptr<C>();
    C* sm = smooth.defined() ? smooth.data_ptr<C>() : nullptr;
    parallel_for(0, n, std::max<int64_t>(1, 16384 / (sm ? std::max<int64_t>(nc, 1) : 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     // Class c of position i is at row + c * D.
                     const C* row = lp + (i / D) * nc * D + i % D;
                     if (t[i] == ignore_index) {
                       lo[i] = tw[i] = 0;
                       if (sm) sm[i] = 0;
                       continue;
                     }
                     C wt = w ? w[t[i]] : C(1);
                     lo[i] = -wt * row[t[i] * D];
                     tw[i] = wt;
                     if (sm) {
                       C s = 0;
                       for (int64_t c = 0; c < nc; ++c) s += (w ? w[c] : C(1)) * row[c * D];
                       sm[i] = -s;
                     }
                   }
                 });
  });
}

void soft_cross_entropy_kernel(const Tensor& loss, const Tensor& logp, const Tensor& target,
                               const Tensor& weight, double label_smoothing) {
  int64_t nc = logp.size(1), D = logp.size(2), n = loss.numel();
  visit_float_compute(logp.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* lp = logp.data_ptr<C>();
    const C* tg = target.data_ptr<C>();
    const C* w = weight.defined() ? weight.data_ptr<C>() : nullptr;
    C* lo = loss.data_ptr<C>();
    auto keep = static_cast<C>(1 - label_smoothing);
    auto uniform = static_cast<C>(label_smoothing / static_cast<double>(nc));
    parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(nc, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t base = (i / D) * nc * D + i % D;
        C s = 0;
        for (int64_t c = 0; c < nc; ++c) {
          int64_t k = base + c * D;
          s += lp[k] * (tg[k] * keep + uniform) * (w ? w[c] : C(1));
        }
        lo[i] = -s;
      }
    });
  });
}

void bce_with_logits_kernel(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& pos_weight) {
  ElementwiseIter it({out, x, t, pos_weight});
  visit_float_compute(out.dtype(), [&](auto tag) {
    using C = decltype(tag);
    cpu_kernel<C, C, 3>(it, ops::BceWithLogits<C>{});
  });
}

// Per n, the [C, D] block of the input in the compute dtype: per-position max and sum of
// exp(x - max) (Eigen over the row when D == 1, over the D columns otherwise), then each
// position's terms from logp = x - lse.
void cross_entropy_forward_kernel(const Tensor& loss, const Tensor& total_weight, const Tensor& smooth,
                                  const Tensor& lse, const Tensor& input, const Tensor& target,
                                  const Tensor& weight, int64_t ignore_index, const char* op) {
  const int64_t N = input.size(0), nc = input.size(1), D = input.size(2), block = nc * D;
  check_targets(op, target, nc, ignore_index);
  const ScalarType dt = input.dtype();
  const int64_t* t = target.data_ptr<int64_t>();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    const C* w = weight.defined() ? weight.data_ptr<C>() : nullptr;
    C* lo = loss.data_ptr<C>();
    C* tw = total_weight.data_ptr<C>();
    C* sm = smooth.defined() ? smooth.data_ptr<C>() : nullptr;
    C* ls = lse.data_ptr<C>();
    parallel_for(0, N, std::max<int64_t>(1, 16384 / std::max<int64_t>(block, 1)), [&](int64_t b, int64_t e) {
      std::vector<C> ibuf(dt == dtype_of<C> ? 0 : block);
      ArrayX<C> m(D), s(D);
      for (int64_t n = b; n < e; ++n) {
        const C* x = load_compute<C>(byte_ptr(input, n * input.stride(0)), dt, block, ibuf.data());
        ArrayMap<C> l(ls + n * D, D);
        if (nc == 0) {
          l.setConstant(-std::numeric_limits<C>::infinity());  // logsumexp of nothing
        } else if (D == 1) {
          ConstArrayMap<C> row(x, nc);
          const C mx = row.maxCoeff();
          l[0] = mx + std::log(exp_ftz(row - mx).sum());
        } else {
          m.setConstant(-std::numeric_limits<C>::infinity());
          for (int64_t c = 0; c < nc; ++c) m = m.max(ConstArrayMap<C>(x + c * D, D));
          s.setZero();
          for (int64_t c = 0; c < nc; ++c) s += exp_ftz(ConstArrayMap<C>(x + c * D, D) - m);
          l = m + s.log();
        }
        for (int64_t d = 0; d < D; ++d) {
          const int64_t p = n * D + d, tp = t[p];
          if (tp == ignore_index) {
            lo[p] = tw[p] = 0;
            if (sm) sm[p] = 0;
            continue;
          }
          const C wt = w ? w[tp] : C(1);
          lo[p] = -wt * (x[tp * D + d] - l[d]);
          tw[p] = wt;
          if (sm) {
            C acc = 0;
            for (int64_t c = 0; c < nc; ++c) acc += (w ? w[c] : C(1)) * (x[c * D + d] - l[d]);
            sm[p] = -acc;
          }
        }
      }
    });
  });
}

// Per n, the [C, D] block of gx: the positions' scale factors first, then class rows (whole rows of
// C when D == 1), then the target entries.
void cross_entropy_backward_kernel(const Tensor& gx, const Tensor& sums, const Tensor& grad,
                                   const Tensor& input, const Tensor& lse, const Tensor& target,
                                   const Tensor& weight, const Tensor& weight_sum, int64_t ignore_index,
                                   double label_smoothing) {
  int64_t N = input.size(0), nc = input.size(1), D = input.size(2), block = nc * D;
  ScalarType dt = gx.dtype();
  const int64_t* t = target.data_ptr<int64_t>();
  visit_float_compute(dt, [&](auto tag) {
    using C = decltype(tag);
    const C* ls = lse.data_ptr<C>();
    const C* ge = grad.data_ptr<C>();
    const C* w = weight.defined() ? weight.data_ptr<C>() : nullptr;
    const bool ge_scalar = grad.numel() == 1;
    const auto keep = static_cast<C>(1 - label_smoothing);
    const auto u = static_cast<C>(label_smoothing / static_cast<double>(nc));
    const C wsum = weight_sum.defined() ? *weight_sum.data_ptr<C>() : static_cast<C>(nc);
    parallel_for(0, N, std::max<int64_t>(1, 16384 / block), [&](int64_t b, int64_t e) {
      std::vector<C> obuf(dt == dtype_of<C> ? 0 : block), ibuf(obuf.size());
      ArrayX<C> g(D), gs(D), at(D);  // ge, ge * s and ge * (1 - ls) * w[t] per position
      for (int64_t n = b; n < e; ++n) {
        for (int64_t d = 0; d < D; ++d) {
          int64_t p = n * D + d;
          bool valid = t[p] != ignore_index;
          C wt = w && valid ? w[t[p]] : C(1);
          g[d] = valid ? ge[ge_scalar ? 0 : p] : C(0);
          gs[d] = g[d] * (keep * wt + u * wsum);
          at[d] = g[d] * keep * wt;
        }
        C* o = out_compute<C>(byte_ptr(gx, n * gx.stride(0)), dt, obuf.data());
        const C* x = load_compute<C>(byte_ptr(input, n * input.stride(0)), dt, block, ibuf.data());
        ConstArrayMap<C> l(ls + n * D, D);
        if (D == 1) {
          ArrayMap<C> row(o, nc);
          row = exp_ftz(ConstArrayMap<C>(x, nc) - l[0]) * gs[0];
          if (w)
            row -= ConstArrayMap<C>(w, nc) * (u * g[0]);
          else
            row -= u * g[0];
        } else {
          for (int64_t c = 0; c < nc; ++c)
            ArrayMap<C>(o + c * D, D) =
                exp_ftz(ConstArrayMap<C>(x + c * D, D) - l) * gs - g * (u * (w ? w[c] : C(1)));
        }
        for (int64_t d = 0; d < D; ++d)
          if (t[n * D + d] != ignore_index) o[t[n * D + d] * D + d] -= at[d];
        store_compute<C>(o, byte_ptr(gx, n * gx.stride(0)), dt, block);
      }
    });
  });
  if (sums.defined()) sums.copy_(gx.select(2, 0).sum({0}, false, sums.dtype()));
}

KernelRegistrar<LossSumFn> reg_sum(loss_sum_stub, kCPU, &loss_sum_kernel);
KernelRegistrar<NllLossFn> reg_nll(nll_loss_stub, kCPU, &nll_loss_kernel);
KernelRegistrar<SoftCrossEntropyFn> reg_soft(soft_cross_entropy_stub, kCPU, &soft_cross_entropy_kernel);
KernelRegistrar<BceWithLogitsFn> reg_bce(bce_with_logits_stub, kCPU, &bce_with_logits_kernel);
KernelRegistrar<CrossEntropyForwardFn> reg_ce_forward(cross_entropy_forward_stub, kCPU,
                                                      &cross_entropy_forward_kernel);
KernelRegistrar<CrossEntropyBackwardFn> reg_ce_backward(cross_entropy_backward_stub, kCPU,
                                                        &cross_entropy_backward_kernel);

}  // namespace
}  // namespace ember::cpu
