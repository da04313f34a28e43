#pragma once

// The two device ops behind amp::GradScaler (PyTorch's torch._amp_foreach_non_finite_check_and_unscale_
// and torch._amp_update_scale_). Both read and write their scalars on the device, so a training
// step that uses them needs no host sync.

#include <cstdint>

#include "ember/core/array_ref.h"
#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// For every element of every tensor: found_inf = 1 where the element is inf or NaN (found_inf is
// never cleared), and the element *= inv_scale, in place. The tensors are floating, on one
// device (any dtypes and strides); found_inf and inv_scale are one-element float32 tensors there.
void _amp_foreach_non_finite_check_and_unscale_(ArrayRef<Tensor> self, const Tensor& found_inf,
                                                const Tensor& inv_scale);

// The GradScaler's scale update, in place: with found_inf nonzero, scale *= backoff_factor and the
// growth tracker resets to 0; otherwise the tracker counts the clean step, and at growth_interval
// clean steps scale *= growth_factor (unless that overflows) and the tracker resets. scale and
// found_inf: one-element float32; growth_tracker: one-element int32; all on one device. Returns
// scale.
const Tensor& _amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                 double growth_factor, double backoff_factor, int64_t growth_interval);

// The kernels see checked lists: one device, one dtype, contiguous, non-empty.
using AmpUnscaleFn = void (*)(ArrayRef<Tensor> tensors, const Tensor& found_inf, const Tensor& inv_scale);
using AmpUpdateScaleFn = void (*)(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                  double growth_factor, double backoff_factor, int64_t growth_interval);
extern DispatchStub<AmpUnscaleFn> amp_unscale_stub;
extern DispatchStub<AmpUpdateScaleFn> amp_update_scale_stub;

}  // namespace ember
