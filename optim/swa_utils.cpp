// torch/optim/swa_utils.py's arithmetic: the EMA and SWA updates as lerp_ (PyTorch's
// _foreach_lerp_), SWALR's get_lr in the same order of operations.
#include "ember/optim/swa_utils.h"

#include <cmath>
#include <map>
#include <numbers>
#include <tuple>

#include "ember/core/factories.h"
#include "ember/core/ops/ternary.h"
#include "ember/nn/normalization.h"

namespace ember::optim::swa_utils {
namespace {

void check_decay(const char* who, double decay) {
  EMBER_CHECK(decay >= 0 && decay <= 1, who, ": decay must be in [0, 1], got ", decay);
}

// The SWA weight 1 / (n + 1) on n's device: float32, as PyTorch's true division of the count
// gives, then in `like`'s dtype for lerp_.
Tensor swa_weight(const Tensor& num_averaged, const Tensor& like) {
  return (num_averaged + 1).to(kFloat32).reciprocal().to(like.dtype());
}

// model's tensors, checked against the average's, on its devices.
std::vector<Tensor> matching(const char* what, const OrderedDict<Tensor>& averaged,
                             const OrderedDict<Tensor>& model) {
  EMBER_CHECK(averaged.size() == model.size(), "AveragedModel.update_parameters: the averaged module has ",
              averaged.size(), " ", what, ", the model ", model.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < averaged.size(); ++i) {
    const auto& [name, a] = averaged.items()[i];
    const auto& [model_name, t] = model.items()[i];
    EMBER_CHECK(name == model_name && a.sizes() == t.sizes() && a.dtype() == t.dtype(),
                "AveragedModel.update_parameters: the model's ", model_name, " (", t.sizes(), ", ", t.dtype(),
                ") does not match the averaged ", name, " (", a.sizes(), ", ", a.dtype(), ")");
    out.push_back(t.detach().to(a.device()));
  }
  return out;
}

}  // namespace

MultiAvgFn get_ema_multi_avg_fn(double decay) {
  check_decay("get_ema_multi_avg_fn", decay);
  return [decay](const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, const Tensor&) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < averaged.size(); ++i) averaged[i].lerp_(current[i], 1 - decay);
  };
}

AvgFn get_ema_avg_fn(double decay) {
  check_decay("get_ema_avg_fn", decay);
  return [decay](const Tensor& averaged, const Tensor& current, const Tensor&) {
    NoGradGuard no_grad;
    return decay * averaged + (1 - decay) * current;
  };
}

MultiAvgFn get_swa_multi_avg_fn() {
  return [](const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, const Tensor& n) {
    NoGradGuard no_grad;
    if (averaged.empty()) return;
    const Tensor weight = swa_weight(n, averaged[0]);  // the lists share a device and a dtype
    for (size_t i = 0; i < averaged.size(); ++i) averaged[i].lerp_(current[i], weight);
  };
}

AvgFn get_swa_avg_fn() {
  return [](const Tensor& averaged, const Tensor& current, const Tensor& n) {
    NoGradGuard no_grad;
    return averaged + (current - averaged) / (n + 1);
  };
}

AveragedModel::AveragedModel(std::shared_ptr<nn::Module> module, MultiAvgFn multi_avg_fn, bool use_buffers)
    : Module("AveragedModel"), multi_avg_fn_(std::move(multi_avg_fn)), use_buffers_(use_buffers) {
  EMBER_CHECK(module, "AveragedModel: expected a module to hold the average, got null");
  module_ = register_module("module", std::move(module));
  Device device = kCPU;
  for (const Tensor& t : module_->parameters()) device = t.device();
  n_averaged_ = register_buffer("n_averaged", zeros({}, TensorOptions(kInt64).device(device)));
  count_version_ = n_averaged_._version();
}

AveragedModel::AveragedModel(std::shared_ptr<nn::Module> module, AvgFn avg_fn, bool use_buffers)
    : AveragedModel(std::move(module), MultiAvgFn{}, use_buffers) {
  avg_fn_ = std::move(avg_fn);
}

int64_t AveragedModel::count() {
  if (n_averaged_._version() != count_version_) {  // loaded or set from outside: read it once
    count_ = n_averaged_.item<int64_t>();
    count_version_ = n_averaged_._version();
  }
  return count_;
}

void AveragedModel::update_parameters(const nn::Module& model) {
  NoGradGuard no_grad;
  const bool first = count() == 0;
  const OrderedDict<Tensor> own_params = module_->named_parameters(), own_buffers = module_->named_buffers();
  std::vector<Tensor> current = matching("parameters", own_params, model.named_parameters());
  const std::vector<Tensor> model_buffers = matching("buffers", own_buffers, model.named_buffers());
  std::vector<Tensor> averaged;
  for (const auto& [name, p] : own_params.items()) averaged.push_back(p);
  // Buffers are averaged with use_buffers (but integer ones, counts, are copied), else copied.
  std::vector<Tensor> copied, copied_from;
  for (size_t i = 0; i < own_buffers.size(); ++i) {
    const Tensor& b = own_buffers.items()[i].second;
    if (use_buffers_ && is_floating_point(b.dtype())) {
      averaged.push_back(b);
      current.push_back(model_buffers[i]);
    } else {
      copied.push_back(b);
      copied_from.push_back(model_buffers[i]);
    }
  }
  if (first) {
    for (size_t i = 0; i < averaged.size(); ++i) averaged[i].copy_(current[i]);
  } else if (avg_fn_) {
    for (size_t i = 0; i < averaged.size(); ++i)
      averaged[i].copy_(avg_fn_(averaged[i], current[i], n_averaged_.to(averaged[i].device())));
  } else {
    // The function sees one device and dtype at a time, as PyTorch groups its lists.
    std::map<std::tuple<int, int, int>, std::pair<std::vector<Tensor>, std::vector<Tensor>>> groups;
    for (size_t i = 0; i < averaged.size(); ++i) {
      const Tensor& a = averaged[i];
      auto& [as, cs] =
          groups[{static_cast<int>(a.device().type), a.device().index, static_cast<int>(a.dtype())}];
      as.push_back(a);
      cs.push_back(current[i]);
    }
    const MultiAvgFn& fn = multi_avg_fn_ ? multi_avg_fn_ : get_swa_multi_avg_fn();
    for (const auto& [key, lists] : groups)
      fn(lists.first, lists.second, n_averaged_.to(lists.first[0].device()));
  }
  for (size_t i = 0; i < copied.size(); ++i) copied[i].copy_(copied_from[i]);
  n_averaged_.add_(1);
  ++count_;
  count_version_ = n_averaged_._version();
}

namespace detail {

BatchNormRecount::BatchNormRecount(nn::Module& model) : model_(model), was_training_(model.is_training()) {
  model.apply([&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNormImplBase*>(&m)) {
      bn->reset_running_stats();
      layers_.emplace_back(bn, bn->options.momentum());
    }
  });
  if (layers_.empty()) return;
  model.train();
  for (auto& [bn, momentum] : layers_) bn->options.momentum(std::nullopt);
}

BatchNormRecount::~BatchNormRecount() {
  if (layers_.empty()) return;
  for (auto& [bn, momentum] : layers_) bn->options.momentum(momentum);
  model_.train(was_training_);
}

}  // namespace detail

SWALR::SWALR(Optimizer& optimizer, std::vector<double> swa_lrs, int64_t anneal_epochs,
             const std::string& anneal_strategy)
    : LRScheduler(optimizer),
      swa_lrs_(optim::detail::per_group("SWALR", "swa_lr", swa_lrs, base_lrs_.size())),
      anneal_epochs_(anneal_epochs),
      linear_(anneal_strategy == "linear") {
  EMBER_CHECK(anneal_strategy == "cos" || anneal_strategy == "linear",
              "SWALR: anneal_strategy must by one of 'cos' or 'linear', instead got ", anneal_strategy);
  EMBER_CHECK(anneal_epochs >= 0, "SWALR: anneal_epochs must be equal or greater than 0, got ",
              anneal_epochs);
  initial_step();
}

double SWALR::anneal(double t) const { return linear_ ? t : (1 - std::cos(std::numbers::pi * t)) / 2; }

std::vector<double> SWALR::get_lr() {
  int64_t step = step_count_ - 1;
  if (anneal_epochs_ == 0) step = std::max<int64_t>(1, step);
  const double span = static_cast<double>(std::max<int64_t>(1, anneal_epochs_));
  const double prev_t = std::max(0.0, std::min(1.0, static_cast<double>(step - 1) / span));
  const double prev_alpha = anneal(prev_t);
  const double t = std::max(0.0, std::min(1.0, static_cast<double>(step) / span));
  const double alpha = anneal(t);
  std::vector<double> lrs = current_lrs();
  for (size_t i = 0; i < lrs.size(); ++i) {
    // The lr before the annealing began, from where the last step left it.
    const double initial =
        prev_alpha == 1 ? swa_lrs_[i] : (lrs[i] - prev_alpha * swa_lrs_[i]) / (1 - prev_alpha);
    lrs[i] = swa_lrs_[i] * alpha + initial * (1 - alpha);
  }
  return lrs;
}

}  // namespace ember::optim::swa_utils
