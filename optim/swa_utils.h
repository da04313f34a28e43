#pragma once

// torch.optim.swa_utils: weight averaging (SWA and EMA) in an AveragedModel, the SWALR schedule,
// and update_bn, which recomputes BatchNorm statistics for averaged weights.
//
//   auto net = make_model(), ema_net = make_model();  // the same architecture twice
//   optim::swa_utils::AveragedModel ema(ema_net, optim::swa_utils::get_ema_multi_avg_fn(0.999));
//   for (...) { ...; opt.step(); ema.update_parameters(*net); }
//   ema_net->forward(x);  // evaluates the averaged weights
//
// PyTorch's AveragedModel deep-copies the model; a C++ module cannot be copied, so it takes a
// second instance built as the model was, and the first update_parameters copies the model's
// values into it. Its state_dict has PyTorch's keys ("n_averaged", "module.<name>").

#include <concepts>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/core/grad_mode.h"
#include "ember/nn/module.h"
#include "ember/optim/lr_scheduler.h"

namespace ember::nn {
class BatchNormImplBase;
}

namespace ember::optim::swa_utils {

// Updates `averaged` in place from `current` (same shapes, dtype and device, grouped so);
// num_averaged is the int64 count of models averaged so far, on their device.
using MultiAvgFn = std::function<void(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current,
                                      const Tensor& num_averaged)>;
// Returns the new average of one tensor.
using AvgFn =
    std::function<Tensor(const Tensor& averaged, const Tensor& current, const Tensor& num_averaged)>;

// averaged = decay * averaged + (1 - decay) * current, decay in [0, 1].
MultiAvgFn get_ema_multi_avg_fn(double decay = 0.999);
AvgFn get_ema_avg_fn(double decay = 0.999);
// The running mean: averaged += (current - averaged) / (num_averaged + 1).
MultiAvgFn get_swa_multi_avg_fn();
AvgFn get_swa_avg_fn();

class AveragedModel : public nn::Module {
 public:
  // `module` holds the average; without a function, the equal-weight mean (SWA). With
  // use_buffers the buffers are averaged too (integer ones, such as BatchNorm's batch count,
  // are copied); otherwise they are copied from the model at each update.
  explicit AveragedModel(std::shared_ptr<nn::Module> module, MultiAvgFn multi_avg_fn = {},
                         bool use_buffers = false);
  AveragedModel(std::shared_ptr<nn::Module> module, AvgFn avg_fn, bool use_buffers = false);
  template <nn::AnyModuleHolder H>
  explicit AveragedModel(const H& module, MultiAvgFn multi_avg_fn = {}, bool use_buffers = false)
      : AveragedModel(std::shared_ptr<nn::Module>(module.ptr()), std::move(multi_avg_fn), use_buffers) {}
  template <nn::AnyModuleHolder H>
  AveragedModel(const H& module, AvgFn avg_fn, bool use_buffers = false)
      : AveragedModel(std::shared_ptr<nn::Module>(module.ptr()), std::move(avg_fn), use_buffers) {}

  // Folds the model's current parameters (and buffers, with use_buffers) into the average; the
  // first call copies them. The model must have the averaged module's names, shapes and dtypes;
  // it may live on another device. Reads the count from the GPU only after n_averaged was
  // written from outside (load_state_dict).
  void update_parameters(const nn::Module& model);

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const Tensor& n_averaged() const { return n_averaged_; }

 private:
  // The count of models averaged, from the host's copy while n_averaged is as this class left it.
  int64_t count();

  std::shared_ptr<nn::Module> module_;
  Tensor n_averaged_;
  MultiAvgFn multi_avg_fn_;
  AvgFn avg_fn_;
  bool use_buffers_;
  int64_t count_ = 0;
  uint32_t count_version_ = 0;  // n_averaged's version when count_ was last true to it
};

namespace detail {
// update_bn's frame: resets every BatchNorm's running statistics, sets its momentum to the
// cumulative average and the model to training; the destructor puts momenta and mode back.
class BatchNormRecount {
 public:
  explicit BatchNormRecount(nn::Module& model);
  ~BatchNormRecount();
  BatchNormRecount(const BatchNormRecount&) = delete;
  BatchNormRecount& operator=(const BatchNormRecount&) = delete;
  bool empty() const { return layers_.empty(); }

 private:
  nn::Module& model_;
  bool was_training_;
  std::vector<std::pair<nn::BatchNormImplBase*, std::optional<double>>> layers_;  // and momenta
};
}  // namespace detail

// One pass over `loader` to recompute the BatchNorm statistics of `model` (a module holder or
// shared_ptr) for the weights it has now. Each batch is a tensor, or a sequence whose first
// element is the input; it moves to `device` if given.
template <class Loader, class M>
void update_bn(Loader&& loader, const M& model, std::optional<Device> device = std::nullopt) {
  detail::BatchNormRecount recount(*model);
  if (recount.empty()) return;
  NoGradGuard no_grad;
  for (auto&& batch : loader) {
    Tensor input;
    if constexpr (std::is_convertible_v<decltype(batch), Tensor>)
      input = batch;
    else
      input = batch[0];
    model->forward(device ? input.to(*device) : input);
  }
}

// Anneals each group's lr to its swa_lr over anneal_epochs steps ("cos" or "linear"), then keeps
// it there, as PyTorch's SWALR.
class SWALR : public LRScheduler {
 public:
  // swa_lrs: one value, or one per group.
  SWALR(Optimizer& optimizer, std::vector<double> swa_lrs, int64_t anneal_epochs = 10,
        const std::string& anneal_strategy = "cos");
  const char* name() const override { return "SWALR"; }
  const std::vector<double>& swa_lrs() const { return swa_lrs_; }

 protected:
  std::vector<double> get_lr() override;

 private:
  double anneal(double t) const;

  std::vector<double> swa_lrs_;
  int64_t anneal_epochs_;
  bool linear_;
};

}  // namespace ember::optim::swa_utils
