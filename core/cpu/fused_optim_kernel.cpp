// CPU kernels of the fused optimizer steps: the elements of all tensors form one index range,
// split over the threads in one parallel pass, with the math of fused_optim_functors.h.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ember/core/ops/fused_optim.h"
#include "ember/core/ops/fused_optim_functors.h"
#include "ember/core/parallel.h"

namespace ember {
namespace {

constexpr int64_t kGrain = 32768;

// Calls f(t, begin, end) on the element ranges of tensors[t] that the threads' shares of all
// elements cover.
template <class F>
void for_each_range(ArrayRef<Tensor> tensors, const F& f) {
  std::vector<int64_t> offsets(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) offsets[i + 1] = offsets[i] + tensors[i].numel();
  parallel_for(0, offsets.back(), kGrain, [&](int64_t b, int64_t e) {
    // The last tensor starting at or before b is the non-empty one holding element b.
    size_t t = std::upper_bound(offsets.begin(), offsets.end(), b) - offsets.begin() - 1;
    for (; b < e; ++t) {
      int64_t stop = std::min(e, offsets[t + 1]);
      if (stop > b) f(t, b - offsets[t], stop - offsets[t]);
      b = stop;
    }
  });
}

bool skip_step(const Tensor& found_inf) { return found_inf.defined() && *found_inf.data_ptr<float>() != 0; }

// The step's arguments with the rate from `lr` when given.
template <class Args>
Args with_lr(Args args, const Tensor& lr) {
  if (lr.defined()) args.lr = *lr.data_ptr<double>();
  return args;
}

// The gradient as the update sees it: divided by grad_scale (and stored back unscaled) when given.
template <class S, class T>
T load_grad(S* g, const float* scale) {
  T v = static_cast<T>(*g);
  if (scale) {
    v = v / static_cast<T>(*scale);
    *g = static_cast<S>(v);
  }
  return v;
}

template <class S>
S* data_or_null(ArrayRef<Tensor> list, size_t t) {
  return list.empty() ? nullptr : list[t].data_ptr<S>();
}

// f(copy) with params[t]'s copy as a float16 or bfloat16 pointer (copies are only of float32
// params), or as a null S* when it has none.
template <class S, class F>
void with_copy(ArrayRef<Tensor> copies, size_t t, const F& f) {
  if constexpr (std::is_same_v<S, float>) {
    if (!copies.empty() && copies[t].defined()) {
      if (copies[t].dtype() == kBFloat16) return f(copies[t].data_ptr<BFloat16>());
      return f(copies[t].data_ptr<Half>());
    }
  }
  f(static_cast<S*>(nullptr));
}

void fused_adam_kernel(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                       ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs,
                       ArrayRef<Tensor> state_steps, const FusedAdamArgs& adam, const Tensor& grad_scale,
                       const Tensor& found_inf, const Tensor& lr, ArrayRef<Tensor> param_copies) {
  if (skip_step(found_inf)) return;
  const FusedAdamArgs args = with_lr(adam, lr);
  const float* scale = grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr;
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    using T = ops::OptimMath<S>;
    std::vector<ops::AdamUpdate<T>> updates;
    for (const Tensor& s : state_steps) updates.emplace_back(args, *s.data_ptr<float>() += 1);
    for_each_range(params, [&](size_t t, int64_t b, int64_t e) {
      S *p = params[t].data_ptr<S>(), *g = grads[t].data_ptr<S>(), *m = exp_avgs[t].data_ptr<S>();
      S *v = exp_avg_sqs[t].data_ptr<S>(), *vmax = data_or_null<S>(max_exp_avg_sqs, t);
      const ops::AdamUpdate<T>& update = updates[t];
      with_copy<S>(param_copies, t, [&](auto* copy) {
        for (int64_t i = b; i < e; ++i) {
          T pi = p[i], mi = m[i], vi = v[i], vmaxi = vmax ? static_cast<T>(vmax[i]) : T(0);
          update(pi, load_grad<S, T>(g + i, scale), mi, vi, vmaxi);
          p[i] = static_cast<S>(pi);
          m[i] = static_cast<S>(mi);
          v[i] = static_cast<S>(vi);
          if (vmax) vmax[i] = static_cast<S>(vmaxi);
          if (copy) copy[i] = static_cast<std::remove_pointer_t<decltype(copy)>>(p[i]);
        }
      });
    });
  });
}

void fused_sgd_kernel(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> momentum_buffers,
                      const FusedSgdArgs& sgd, const Tensor& grad_scale, const Tensor& found_inf,
                      const Tensor& lr, ArrayRef<Tensor> param_copies) {
  if (skip_step(found_inf)) return;
  const FusedSgdArgs args = with_lr(sgd, lr);
  const float* scale = grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr;
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    using T = ops::OptimMath<S>;
    const ops::SgdUpdate<T> update(args);
    for_each_range(params, [&](size_t t, int64_t b, int64_t e) {
      S *p = params[t].data_ptr<S>(), *g = grads[t].data_ptr<S>(),
        *buf = data_or_null<S>(momentum_buffers, t);
      with_copy<S>(param_copies, t, [&](auto* copy) {
        for (int64_t i = b; i < e; ++i) {
          T pi = p[i], bufi = buf ? static_cast<T>(buf[i]) : T(0);
          update(pi, load_grad<S, T>(g + i, scale), bufi);
          p[i] = static_cast<S>(pi);
          if (buf) buf[i] = static_cast<S>(bufi);
          if (copy) copy[i] = static_cast<std::remove_pointer_t<decltype(copy)>>(p[i]);
        }
      });
    });
  });
}

KernelRegistrar<FusedAdamFn> adam_reg(fused_adam_stub, kCPU, &fused_adam_kernel);
KernelRegistrar<FusedSgdFn> sgd_reg(fused_sgd_stub, kCPU, &fused_sgd_kernel);

}  // namespace
}  // namespace ember
