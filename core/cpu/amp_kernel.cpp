// CPU kernels of the GradScaler's ops: a threaded pass per tensor, and the scale update.
#include <atomic>
#include <cmath>

#include "ember/core/ops/amp_functors.h"
#include "ember/core/ops/amp_ops.h"
#include "ember/core/ops/fused_optim_functors.h"
#include "ember/core/parallel.h"

namespace ember {
namespace {

constexpr int64_t kGrain = 32768;

void amp_unscale_cpu(ArrayRef<Tensor> tensors, const Tensor& found_inf, const Tensor& inv_scale) {
  const float inv = *inv_scale.data_ptr<float>();
  std::atomic<bool> found(false);
  ops::visit_optim_dtype(tensors[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    using T = ops::OptimMath<S>;
    for (const Tensor& t : tensors) {
      S* p = t.data_ptr<S>();
      parallel_for(0, t.numel(), kGrain, [&](int64_t b, int64_t e) {
        bool any = false;
        for (int64_t i = b; i < e; ++i) {
          T v = static_cast<T>(p[i]);
          any |= !std::isfinite(v);
          if (inv != 1.f) p[i] = static_cast<S>(v * static_cast<T>(inv));
        }
        if (any) found.store(true, std::memory_order_relaxed);
      });
    }
  });
  if (found.load()) *found_inf.data_ptr<float>() = 1.f;
}

void amp_update_scale_cpu(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                          double growth_factor, double backoff_factor, int64_t growth_interval) {
  ops::update_scale(scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.data_ptr<float>(),
                    growth_factor, backoff_factor, growth_interval);
}

KernelRegistrar<AmpUnscaleFn> unscale_reg(amp_unscale_stub, kCPU, &amp_unscale_cpu);
KernelRegistrar<AmpUpdateScaleFn> update_reg(amp_update_scale_stub, kCPU, &amp_update_scale_cpu);

}  // namespace
}  // namespace ember
