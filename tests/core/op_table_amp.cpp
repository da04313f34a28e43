// Op-table entries of the GradScaler's ops. The unscale samples are lists of gradients (one,
// several, zero-size, 0-dim, non-contiguous, with an inf and with a NaN); fn unscales copies by
// 0.25 and returns them flattened, followed by found_inf. The update samples are
// (scale, growth_tracker, found_inf); fn runs one update (growth_interval 3) on copies and returns
// (scale, growth_tracker). The CUDA suite compares both with the CPU.
#include <cmath>

#include "ember/core/ops/amp_ops.h"
#include "test_util.h"

namespace ember::testing {
namespace {

using Inputs = std::vector<Tensor>;

Tensor with_value(const Tensor& t, double v) { return cat({t, full({1}, v, t.dtype())}); }

std::vector<Sample> unscale_samples(ScalarType dt) {
  std::vector<Sample> out;
  const std::vector<std::vector<DimVector>> shapes = {
      {{4, 5}}, {{3}, {2, 3}, {7}}, {{0, 4}, {6}}, {DimVector{}}};
  for (const std::vector<DimVector>& list : shapes) {
    Sample s;
    for (const DimVector& shape : list) s.inputs.push_back(random_tensor(shape, dt));
    s.desc = std::to_string(list.size()) + " tensors";
    out.push_back(s);
  }
  out.push_back({{non_contiguous(random_tensor({3, 4}, dt)), random_tensor({5}, dt)}, "non-contiguous"});
  out.push_back({{random_tensor({3}, dt), with_value(random_tensor({4}, dt), INFINITY)}, "an inf"});
  out.push_back({{with_value(random_tensor({4}, dt), NAN)}, "a NaN"});
  out.push_back(
      {{with_value(random_tensor({4}, dt), -INFINITY), random_tensor({70000}, dt)}, "-inf, many chunks"});
  return out;
}

Tensor unscale_fn(const Inputs& in) {
  std::vector<Tensor> ts, flat;
  for (const Tensor& t : in) ts.push_back(t.is_contiguous() ? t.clone() : non_contiguous(t));
  const TensorOptions f32 = TensorOptions(kFloat32).device(in[0].device());
  Tensor found_inf = zeros({}, f32);
  _amp_foreach_non_finite_check_and_unscale_(ts, found_inf, full({}, 0.25, f32));
  for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
  flat.push_back(found_inf.to(in[0].dtype()).reshape({1}));
  return cat(flat);
}

std::vector<Sample> update_samples(ScalarType dt) {
  std::vector<Sample> out;
  // (scale, tracker, found_inf): back off; count a clean step; grow at the interval; an overflowing
  // growth keeps the scale.
  const double cases[][3] = {{1024, 1, 1}, {1024, 0, 0}, {1024, 2, 0}, {3e38, 2, 0}};
  for (const auto& c : cases)
    out.push_back({{full({}, c[0], dt), full({}, c[1], kInt32), full({}, c[2], dt)},
                   "scale " + std::to_string(c[0]) + ", tracker " + std::to_string(c[1]) + ", found_inf " +
                       std::to_string(c[2])});
  return out;
}

Tensor update_fn(const Inputs& in) {
  Tensor scale = in[0].to(kFloat32, /*non_blocking=*/false, /*copy=*/true), tracker = in[1].clone(), found_inf = in[2].to(kFloat32);
  _amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3);
  return cat({scale.reshape({1}), tracker.to(kFloat32).reshape({1})});
}

const OpTableRegistrar registrar({
    {"_amp_foreach_non_finite_check_and_unscale_", unscale_samples, unscale_fn},
    {"_amp_update_scale_", update_samples, update_fn, {kFloat32}},
});

}  // namespace
}  // namespace ember::testing
