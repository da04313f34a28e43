#include "ember/optim/grad_scaler.h"

#include <algorithm>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/amp_ops.h"
#include "ember/optim/state_text.h"

namespace ember::amp {
namespace {

void check_growth_factor(double v) {
  EMBER_CHECK(v > 1.0, "GradScaler: growth_factor must be > 1.0, got ", v);
}
void check_backoff_factor(double v) {
  EMBER_CHECK(v < 1.0, "GradScaler: backoff_factor must be < 1.0, got ", v);
}
void check_growth_interval(int64_t v) {
  EMBER_CHECK(v > 0, "GradScaler: growth_interval must be positive, got ", v);
}

Tensor scalar_on(Device device, double v, ScalarType dtype = kFloat32) {
  return full({}, v, TensorOptions(dtype).device(device));
}

}  // namespace

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval, bool enabled)
    : init_scale_(init_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval),
      enabled_(enabled) {
  if (!enabled_) return;
  check_growth_factor(growth_factor);
  check_backoff_factor(backoff_factor);
  check_growth_interval(growth_interval);
}

void GradScaler::set_growth_factor(double v) {
  check_growth_factor(v);
  growth_factor_ = v;
}
void GradScaler::set_backoff_factor(double v) {
  check_backoff_factor(v);
  backoff_factor_ = v;
}
void GradScaler::set_growth_interval(int64_t v) {
  check_growth_interval(v);
  growth_interval_ = v;
}

void GradScaler::lazy_init(Device device) {
  scale_ = scalar_on(device, init_scale_);
  growth_tracker_ = scalar_on(device, init_growth_tracker_, kInt32);
}

void GradScaler::check_scale(const char* method) const {
  EMBER_CHECK(scale_.defined(), "GradScaler: ", method,
              "() was called before scale(): scale the loss (scaler.scale(loss).backward()) first in the "
              "iteration");
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  EMBER_CHECK(outputs.defined(), "GradScaler: scale() got an undefined tensor");
  if (!scale_.defined()) lazy_init(outputs.device());
  return outputs * scale_.to(outputs.device());
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

std::vector<std::pair<Device, Tensor>> GradScaler::unscale_grads(optim::Optimizer& optimizer,
                                                                 const Tensor& inv_scale,
                                                                 bool allow_fp16) const {
  std::vector<std::pair<Device, std::vector<Tensor>>> per_device;
  for (const optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      EMBER_CHECK(allow_fp16 || g.dtype() != kFloat16,
                  "GradScaler: attempting to unscale float16 gradients (keep the parameters in float32 and "
                  "let autocast cast them)");
      auto it = std::find_if(per_device.begin(), per_device.end(),
                             [&](const auto& e) { return e.first == g.device(); });
      if (it == per_device.end()) it = per_device.insert(per_device.end(), {g.device(), {}});
      it->second.push_back(g);
    }
  }
  NoGradGuard no_grad;
  std::vector<std::pair<Device, Tensor>> found;
  for (const auto& [device, grads] : per_device) {
    Tensor found_inf = scalar_on(device, 0.0);
    _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale.to(device));
    found.emplace_back(device, found_inf);
  }
  return found;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  check_scale("unscale_");
  OptimizerState& state = per_optimizer_states_[&optimizer];
  EMBER_CHECK(state.stage != Stage::kUnscaled,
              "GradScaler: unscale_() has already been called on this optimizer since the last update()");
  EMBER_CHECK(state.stage != Stage::kStepped, "GradScaler: unscale_() is being called after step()");
  NoGradGuard no_grad;
  Tensor inv_scale = scale_.to(kFloat64).reciprocal().to(kFloat32);
  state.found_inf_per_device = unscale_grads(optimizer, inv_scale, false);
  agree_on_found_inf(state.found_inf_per_device);
  state.stage = Stage::kUnscaled;
}

Tensor GradScaler::found_inf_sum(const OptimizerState& state) const {
  Tensor sum = scalar_on(scale_.device(), 0.0);
  for (const auto& [device, found_inf] : state.found_inf_per_device) sum.add_(found_inf.to(scale_.device()));
  return sum;
}

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return;
  }
  check_scale("step");
  OptimizerState& state = per_optimizer_states_[&optimizer];
  EMBER_CHECK(state.stage != Stage::kStepped,
              "GradScaler: step() has already been called since the last update()");
  if (optimizer.step_supports_amp_scaling()) {
    // The fused kernels unscale (unless unscale_() did) and skip on found_inf on the device.
    if (state.stage == Stage::kReady) {
      NoGradGuard no_grad;
      state.found_inf_per_device = unscale_grads(optimizer, scalar_on(scale_.device(), 1.0), true);
      agree_on_found_inf(state.found_inf_per_device);
    }
    optimizer.set_grad_scaling(state.stage == Stage::kUnscaled ? Tensor() : scale_, found_inf_sum(state));
    try {
      optimizer.step();
    } catch (...) {
      optimizer.set_grad_scaling({}, {});
      throw;
    }
    optimizer.set_grad_scaling({}, {});
  } else {
    if (state.stage == Stage::kReady) unscale_(optimizer);
    if (found_inf_sum(state).item<float>() == 0) optimizer.step();  // a host sync, as PyTorch
  }
  state.stage = Stage::kStepped;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  check_scale("update");
  if (new_scale) {
    scale_.fill_(*new_scale);
  } else {
    Tensor found_inf;
    for (const auto& [opt, state] : per_optimizer_states_)
      for (const auto& [device, f] : state.found_inf_per_device) {
        Tensor here = f.to(scale_.device());
        found_inf = found_inf.defined() ? found_inf + here : here;
      }
    EMBER_CHECK(found_inf.defined(), "GradScaler: no inf checks were recorded prior to update()");
    _amp_update_scale_(scale_, growth_tracker_, found_inf, growth_factor_, backoff_factor_, growth_interval_);
  }
  per_optimizer_states_.clear();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return;
  check_scale("update");
  EMBER_CHECK(new_scale.defined() && new_scale.numel() == 1 && !new_scale.requires_grad() &&
                  new_scale.device().type == scale_.device().type,
              "GradScaler: new_scale should be a number or a one-element tensor on the scale's device type (",
              scale_.device(), ") with requires_grad false");
  scale_.copy_(new_scale.reshape({}));
  per_optimizer_states_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item<float>() : init_scale_;
}

StateDict GradScaler::state_dict() const {
  StateDict sd;
  if (!enabled_) return sd;
  using optim::detail::format_number;
  sd.metadata["scale"] = format_number(get_scale());
  sd.metadata["growth_factor"] = format_number(growth_factor_);
  sd.metadata["backoff_factor"] = format_number(backoff_factor_);
  sd.metadata["growth_interval"] = format_number(static_cast<double>(growth_interval_));
  sd.metadata["_growth_tracker"] =
      format_number(growth_tracker_.defined() ? growth_tracker_.item<int32_t>()
                                              : static_cast<double>(init_growth_tracker_));
  return sd;
}

void GradScaler::load_state_dict(const StateDict& state_dict) {
  if (!enabled_) return;
  EMBER_CHECK(!state_dict.metadata.empty(),
              "GradScaler: the source state dict is empty, possibly because it was saved from a disabled "
              "GradScaler");
  const char* who = "GradScaler";
  auto number = [&](const char* key) {
    return optim::detail::parse_number(who, key, optim::detail::metadata_at(state_dict.metadata, who, key));
  };
  const double scale = number("scale"), growth_factor = number("growth_factor"),
               backoff_factor = number("backoff_factor"), growth_interval = number("growth_interval"),
               growth_tracker = number("_growth_tracker");
  check_growth_factor(growth_factor);
  check_backoff_factor(backoff_factor);
  check_growth_interval(static_cast<int64_t>(growth_interval));
  init_scale_ = scale;
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = static_cast<int64_t>(growth_interval);
  init_growth_tracker_ = static_cast<int32_t>(growth_tracker);
  if (scale_.defined()) scale_.fill_(scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(init_growth_tracker_);
}

}  // namespace ember::amp
