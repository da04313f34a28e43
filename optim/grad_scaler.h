#pragma once

// Gradient scaling for float16 training (torch.amp.GradScaler): the loss is multiplied by a large
// scale so small float16 gradients do not flush to zero; before the step the gradients are
// divided back and checked, a step with inf/NaN gradients is skipped, and the scale backs off
// after such a step and grows after `growth_interval` clean ones.
//
//   amp::GradScaler scaler;
//   for (auto& [x, y] : loader) {
//     optimizer.zero_grad();
//     Tensor loss;
//     { amp::AutocastGuard autocast(kCUDA, kFloat16); loss = criterion(model(x), y); }
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);             // optional: to clip the true gradients
//     nn::utils::clip_grad_norm_(params, 1.0);
//     scaler.step(optimizer);                 // skipped when a gradient is inf/NaN
//     scaler.update();
//   }
//
// The scale, the growth tracker and the found-inf flags are device tensors. A fused optimizer step
// reads them on the device (no host sync); a per-tensor step reads found_inf on the host first,
// as PyTorch does.

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/state_dict.h"
#include "ember/core/tensor.h"
#include "ember/optim/optimizer.h"

namespace ember::amp {

class GradScaler {
 public:
  // PyTorch's defaults. A disabled scaler passes everything through: scale() returns its input,
  // step() is optimizer.step(), unscale_() and update() do nothing.
  explicit GradScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000, bool enabled = true);
  virtual ~GradScaler() = default;
  GradScaler(const GradScaler&) = default;
  GradScaler& operator=(const GradScaler&) = default;
  GradScaler(GradScaler&&) = default;
  GradScaler& operator=(GradScaler&&) = default;

  // outputs * scale (the scale lives on the first output's device from the first call on).
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by the scale in place and records whether any is inf/NaN:
  // one fused pass per device and dtype. At most once per optimizer between update() calls.
  void unscale_(optim::Optimizer& optimizer);
  // optimizer.step() unless a gradient was inf/NaN; unscales first unless unscale_() did.
  void step(optim::Optimizer& optimizer);
  // Backs off or grows the scale from this iteration's found-inf flags, or sets `new_scale`.
  void update(std::optional<double> new_scale = std::nullopt);
  void update(const Tensor& new_scale);

  // The current scale (waits for the device); 1 when disabled.
  double get_scale() const;
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double v);
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double v);
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t v);
  bool is_enabled() const { return enabled_; }

  // PyTorch's keys as metadata numbers: "scale", "growth_factor", "backoff_factor",
  // "growth_interval", "_growth_tracker"; empty when disabled.
  StateDict state_dict() const;
  // Throws when `state_dict` is empty (saved from a disabled scaler) or lacks a key.
  void load_state_dict(const StateDict& state_dict);

 protected:
  // The found-inf flags (one per device) of an optimizer's unscaled gradients, before step() or
  // update() reads them. Here unchanged; a scaler whose optimizer holds a shard of the gradients
  // makes every rank agree on them (distributed::ShardedGradScaler).
  virtual void agree_on_found_inf(std::vector<std::pair<Device, Tensor>>& /*found_inf_per_device*/) const {}
  // The scale's device (valid once scale() has run).
  Device scale_device() const { return scale_.device(); }

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptimizerState {
    Stage stage = Stage::kReady;
    std::vector<std::pair<Device, Tensor>> found_inf_per_device;
  };

  void lazy_init(Device device);
  void check_scale(const char* method) const;
  // Unscales the optimizer's gradients by inv_scale and returns a found-inf flag per device.
  std::vector<std::pair<Device, Tensor>> unscale_grads(optim::Optimizer& optimizer, const Tensor& inv_scale,
                                                       bool allow_fp16) const;
  // The sum of the optimizer's found-inf flags, on the scale's device.
  Tensor found_inf_sum(const OptimizerState& state) const;

  double init_scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  bool enabled_;
  int32_t init_growth_tracker_ = 0;
  Tensor scale_, growth_tracker_;  // float32 [1] and int32 [1], created by the first scale()
  std::unordered_map<const optim::Optimizer*, OptimizerState> per_optimizer_states_;
};

}  // namespace ember::amp
