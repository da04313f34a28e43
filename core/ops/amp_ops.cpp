// Frontends of the GradScaler's device ops: every tensor checked here, so the kernels see one
// device, one dtype and contiguous memory.
#include "ember/core/ops/amp_ops.h"

#include <vector>

#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/fused_optim.h"

namespace ember {

constinit DispatchStub<AmpUnscaleFn> amp_unscale_stub("_amp_foreach_non_finite_check_and_unscale_");
constinit DispatchStub<AmpUpdateScaleFn> amp_update_scale_stub("_amp_update_scale_");

namespace {

const OpRegistrar registrar({
    {"_amp_foreach_non_finite_check_and_unscale_", AutocastPolicy::None, false},
    {"_amp_update_scale_", AutocastPolicy::None, false},
});

// A one-element tensor of `dtype`, named `what` in the message.
void check_scalar(const char* op, const char* what, const Tensor& t, ScalarType dtype) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is undefined");
  EMBER_CHECK(t.numel() == 1 && t.dtype() == dtype, op, ": ", what, " must be a one-element ", dtype,
              " tensor, got ", t.dtype(), " of shape ", t.sizes());
}

void check_same_device(const char* op, const char* what, const Tensor& t, const Tensor& ref) {
  EMBER_CHECK(t.device() == ref.device(), op, ": ", what, " is on ", t.device(), ", found_inf on ",
              ref.device());
}

}  // namespace

void _amp_foreach_non_finite_check_and_unscale_(ArrayRef<Tensor> self, const Tensor& found_inf,
                                                const Tensor& inv_scale) {
  detail::OpRange op_range("_amp_foreach_non_finite_check_and_unscale_", self);
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  check_scalar(op, "found_inf", found_inf, kFloat32);
  check_scalar(op, "inv_scale", inv_scale, kFloat32);
  check_same_device(op, "inv_scale", inv_scale, found_inf);
  std::vector<Tensor> work;  // contiguous tensors the kernel updates in place
  std::vector<std::pair<Tensor, Tensor>> copy_back;
  for (size_t i = 0; i < self.size(); ++i) {
    const Tensor& t = self[i];
    EMBER_CHECK(t.defined(), op, ": tensors[", i, "] is undefined");
    EMBER_CHECK(t.is_floating_point(), op, ": tensors must be floating point, tensors[", i, "] is ",
                t.dtype());
    EMBER_CHECK(t.device() == found_inf.device(), op, ": tensors[", i, "] is on ", t.device(),
                ", found_inf on ", found_inf.device());
    check_no_internal_overlap(op, t);
    check_inplace(op, {t});
    if (t.numel() == 0) continue;
    if (t.is_contiguous()) {
      work.push_back(t);
    } else {
      work.push_back(t.contiguous());
      copy_back.emplace_back(t, work.back());
    }
  }
  for (const std::vector<size_t>& same : group_by_device_and_dtype(work)) {
    std::vector<Tensor> group;
    for (size_t i : same) group.push_back(work[i]);
    amp_unscale_stub(found_inf.device())(group, found_inf, inv_scale);
  }
  for (const auto& [t, c] : copy_back) t.copy_(c);
  for (const Tensor& t : self) t.bump_version();
  found_inf.bump_version();
}

const Tensor& _amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                 double growth_factor, double backoff_factor, int64_t growth_interval) {
  detail::OpRange op_range("_amp_update_scale_", scale, growth_tracker, found_inf);
  const char* op = "_amp_update_scale_";
  check_scalar(op, "scale", scale, kFloat32);
  check_scalar(op, "growth_tracker", growth_tracker, kInt32);
  check_scalar(op, "found_inf", found_inf, kFloat32);
  check_same_device(op, "scale", scale, found_inf);
  check_same_device(op, "growth_tracker", growth_tracker, found_inf);
  check_inplace(op, {scale, growth_tracker});
  EMBER_CHECK(growth_interval > 0, op, ": growth_interval must be positive, got ", growth_interval);
  amp_update_scale_stub(scale.device())(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                        growth_interval);
  scale.bump_version();
  growth_tracker.bump_version();
  return scale;
}

}  // namespace ember
