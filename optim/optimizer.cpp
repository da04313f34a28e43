#include "ember/optim/optimizer.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ember/core/autocast_mode.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/cuda/graph.h"
#include "ember/optim/state_text.h"

namespace ember::optim {
namespace {

using detail::format_number;
using detail::parse_number;
using detail::split;

std::string bool_text(bool b) { return b ? "true" : "false"; }

class OptionWriter : public OptionVisitor {
 public:
  OptionWriter(std::map<std::string, std::string>& out, std::string prefix)
      : out_(out), prefix_(std::move(prefix)) {}
  void operator()(const char* name, double& v) override { put(name, format_number(v)); }
  void operator()(const char* name, bool& v) override { put(name, bool_text(v)); }
  void operator()(const char* name, std::tuple<double, double>& v) override {
    put(name, detail::format_numbers({std::get<0>(v), std::get<1>(v)}));
  }
  void operator()(const char* name, std::optional<bool>& v) override { put(name, v ? bool_text(*v) : ""); }

 private:
  void put(const char* name, std::string text) { out_[prefix_ + name] = std::move(text); }
  std::map<std::string, std::string>& out_;
  std::string prefix_;
};

class OptionReader : public OptionVisitor {
 public:
  OptionReader(const std::map<std::string, std::string>& in, std::string prefix, std::string who)
      : in_(in), prefix_(std::move(prefix)), who_(std::move(who)) {}
  void operator()(const char* name, double& v) override { v = parse_number(who_, prefix_ + name, get(name)); }
  void operator()(const char* name, bool& v) override { v = parse_bool(name, get(name)); }
  void operator()(const char* name, std::tuple<double, double>& v) override {
    std::vector<double> numbers = detail::parse_numbers(who_, prefix_ + name, get(name));
    EMBER_CHECK(numbers.size() == 2, who_, ": ", prefix_, name, " is \"", get(name), "\", not two numbers");
    v = {numbers[0], numbers[1]};
  }
  void operator()(const char* name, std::optional<bool>& v) override {
    const std::string& text = get(name);
    v = text.empty() ? std::nullopt : std::optional<bool>(parse_bool(name, text));
  }

 private:
  const std::string& get(const char* name) const { return detail::metadata_at(in_, who_, prefix_ + name); }
  bool parse_bool(const char* name, const std::string& text) const {
    EMBER_CHECK(text == "true" || text == "false", who_, ": ", prefix_, name, " is \"", text,
                "\", not true or false");
    return text == "true";
  }
  const std::map<std::string, std::string>& in_;
  std::string prefix_, who_;
};

// "state.<i>.<rest>" -> (i, rest); nullopt for other keys.
std::optional<std::pair<size_t, std::string>> parse_state_key(const std::string& key) {
  const std::string prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  std::string index = key.substr(prefix.size(), dot - prefix.size());
  if (index.size() > 18 || index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(static_cast<size_t>(std::stoull(index)), key.substr(dot + 1));
}

}  // namespace

double OptimizerOptions::get_momentum() const {
  EMBER_CHECK(false, optimizer_name(), ": the optimizer has no momentum");
  return 0;
}
void OptimizerOptions::set_momentum(double) {
  EMBER_CHECK(false, optimizer_name(), ": the optimizer has no momentum");
}

OptimizerOptions& OptimizerParamGroup::options() {
  EMBER_CHECK(options_, "OptimizerParamGroup: the group has no options");
  return *options_;
}
const OptimizerOptions& OptimizerParamGroup::options() const {
  EMBER_CHECK(options_, "OptimizerParamGroup: the group has no options");
  return *options_;
}

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  defaults_->validate();
  size_t params = 0;
  for (const OptimizerParamGroup& g : groups) params += g.params().size();
  // As PyTorch: an optimizer of nothing is a mistake (a model whose parameters were not passed).
  EMBER_CHECK(params > 0, name(), ": got an empty parameter list");
  for (const OptimizerParamGroup& g : groups) add_param_group(g);
}

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  size_t gi = groups_.size();
  OptimizerParamGroup g(group.params(), group.has_options() ? group.options().clone() : defaults_->clone());
  g.initial_lr() = group.initial_lr();
  EMBER_CHECK(std::string(g.options().optimizer_name()) == name(), name(), ": parameter group ", gi, " has ",
              g.options().optimizer_name(), " options");
  g.options().validate();
  std::set<const TensorImpl*> seen;
  for (const OptimizerParamGroup& other : groups_)
    for (const Tensor& p : other.params()) seen.insert(p.unsafe_impl());
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Tensor& p = g.params()[i];
    EMBER_CHECK(p.defined(), name(), ": parameter ", i, " of group ", gi, " is undefined");
    EMBER_CHECK(p.is_leaf(), name(), ": can't optimize a non-leaf tensor (parameter ", i, " of group ", gi,
                ", shape ", p.sizes(), ")");
    EMBER_CHECK(seen.insert(p.unsafe_impl()).second, name(),
                ": some parameters appear more than once in the parameter groups (parameter ", i,
                " of group ", gi, ", shape ", p.sizes(), ")");
    EMBER_CHECK(!g.options().get_fused().value_or(false) || p.is_floating_point(), name(),
                ": fused=true requires floating point parameters, parameter ", i, " of group ", gi, " is ",
                p.dtype());
  }
  groups_.push_back(std::move(g));
}

Tensor Optimizer::step(const LossClosure& closure) {
  Tensor loss;
  if (closure) {
    EnableGradGuard grad;
    loss = closure();
  }
  NoGradGuard no_grad;
  for (OptimizerParamGroup& g : groups_) step_group(g);
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (OptimizerParamGroup& g : groups_) {
    for (const Tensor& p : g.params()) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        grad.detach_();  // a gradient built with create_graph keeps no history
        NoGradGuard no_grad;
        grad.zero_();
      }
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const OptimizerParamGroup& g : groups_) out.insert(out.end(), g.params().begin(), g.params().end());
  return out;
}

size_t Optimizer::size() const {
  size_t n = 0;
  for (const OptimizerParamGroup& g : groups_) n += g.params().size();
  return n;
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> Optimizer::params_with_grads(
    const OptimizerParamGroup& group) {
  std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
  for (const Tensor& p : group.params()) {
    if (Tensor g = p.grad(); g.defined()) {
      out.first.push_back(p);
      out.second.push_back(g);
    }
  }
  return out;
}

bool Optimizer::use_fused(const OptimizerParamGroup& group, const std::vector<Tensor>& params,
                          const std::vector<Tensor>& grads) const {
  if (params.empty()) return true;
  if (std::optional<bool> fused = group.options().get_fused()) return *fused;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor &p = params[i], &g = grads[i];
    if (!p.is_cuda() || !same_dense_layout(g, p) || g.dtype() != p.dtype() || g.device() != p.device())
      return false;
  }
  return true;
}

bool Optimizer::step_supports_amp_scaling() const {
  for (const OptimizerParamGroup& g : groups_) {
    const auto [params, grads] = params_with_grads(g);
    if (!use_fused(g, params, grads)) return false;
  }
  return true;
}

OptimizerParamState& Optimizer::init_state(const Tensor& param, bool fused) {
  OptimizerParamState& s = state_[param.unsafe_impl()];
  Device where = fused ? param.device() : Device(kCPU);
  if (counts_steps() && !s.step.defined()) s.step = zeros({}, TensorOptions(kFloat32).device(where));
  if (s.step.defined() && s.step.device() != where) s.step = s.step.to(where);
  return s;
}

const Tensor& Optimizer::lr_tensor(OptimizerParamGroup& group, Device device) const {
  const double lr = group.options().get_lr();
  Tensor& t = group.lr_tensor_;
  const bool fresh = !t.defined() || t.device() != device;
  if (fresh || lr != group.lr_written_) {
    EMBER_CHECK(!(device.is_cuda() && cuda::is_current_stream_capturing()), name(),
                fresh
                    ? ": a parameter group's first fused step makes its lr tensor, which cannot be captured "
                      "into a CUDA graph; run a step eagerly first"
                    : ": the lr changed since the last step, and writing it cannot be captured into a CUDA "
                      "graph; call write_lr_tensors() before capturing (LR schedulers do)");
    if (fresh)
      t = full({}, lr, TensorOptions(kFloat64).device(device));
    else
      t.fill_(lr);
    group.lr_written_ = lr;
  }
  return t;
}

void Optimizer::write_lr_tensors() {
  for (OptimizerParamGroup& g : groups_) {
    const double lr = g.options().get_lr();
    if (!g.lr_tensor_.defined() || lr == g.lr_written_) continue;
    g.lr_tensor_.fill_(lr);
    g.lr_written_ = lr;
  }
}

std::pair<Tensor, Tensor> Optimizer::grad_scaling_on(Device device) const {
  auto on = [&](const Tensor& t) { return t.defined() ? t.to(device) : Tensor(); };
  return {on(grad_scale_), on(found_inf_)};
}

void Optimizer::check_per_tensor_step(const std::vector<Tensor>& params) const {
  EMBER_CHECK(!grad_scale_.defined() && !found_inf_.defined(), name(),
              ": grad_scale/found_inf are set (set_grad_scaling) but the group runs the per-tensor step; "
              "they need fused(true)");
  const bool on_gpu = std::any_of(params.begin(), params.end(), [](const Tensor& p) { return p.is_cuda(); });
  EMBER_CHECK(!(on_gpu && cuda::is_current_stream_capturing()), name(),
              ": the per-tensor step keeps step counts and the rate on the host and cannot be captured into a "
              "CUDA graph; use fused(true) (the default for CUDA parameters the fused kernels take)");
}

void Optimizer::set_grad_scaling(const Tensor& grad_scale, const Tensor& found_inf) {
  grad_scale_ = grad_scale;
  found_inf_ = found_inf;
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  sd.metadata["optimizer"] = name();
  sd.metadata["param_groups"] = std::to_string(groups_.size());
  size_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    std::string prefix = "param_groups." + std::to_string(gi) + ".";
    std::string ids;
    for (size_t k = 0; k < groups_[gi].params().size(); ++k) {
      if (k) ids += ',';
      ids += std::to_string(index++);
    }
    sd.metadata[prefix + "params"] = ids;
    OptionWriter writer(sd.metadata, prefix);
    groups_[gi].options().clone()->visit(writer);
  }
  std::vector<Tensor> params = parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = state_.find(params[i].unsafe_impl());
    if (it == state_.end()) continue;
    std::string prefix = "state." + std::to_string(i) + ".";
    if (it->second.step.defined())
      sd.metadata[prefix + "step"] = format_number(it->second.step.item<double>());
    for (const auto& [buffer, t] : it->second.buffers) sd.tensors.insert(prefix + buffer, t.clone());
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  const std::string who = std::string(name()) + ".load_state_dict";
  auto meta = [&](const std::string& key) -> const std::string& {
    return detail::metadata_at(sd.metadata, who, key);
  };
  EMBER_CHECK(meta("optimizer") == name(), who, ": the state dict is from ", meta("optimizer"), ", not ",
              name());
  size_t ngroups = static_cast<size_t>(parse_number(who, "param_groups", meta("param_groups")));
  EMBER_CHECK(ngroups == groups_.size(), who, ": the state dict has ", ngroups,
              " parameter groups, the optimizer has ", groups_.size());

  // Everything is parsed and checked into new objects first; the optimizer changes only at the end.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  std::vector<const OptimizerOptions*> options_of_param;
  for (size_t gi = 0; gi < ngroups; ++gi) {
    std::string prefix = "param_groups." + std::to_string(gi) + ".";
    size_t saved = split(meta(prefix + "params"), ',').size(), have = groups_[gi].params().size();
    EMBER_CHECK(saved == have, who, ": parameter group ", gi, " has ", saved,
                " parameters in the state dict, ", have, " in the optimizer");
    options.push_back(groups_[gi].options().clone());
    OptionReader reader(sd.metadata, prefix, who);
    options.back()->visit(reader);
    options.back()->validate();
    options_of_param.insert(options_of_param.end(), have, options.back().get());
  }

  std::vector<Tensor> params = parameters();
  std::map<size_t, OptimizerParamState> loaded;
  auto param_of = [&](size_t i, const std::string& key) -> const Tensor& {
    EMBER_CHECK(i < params.size(), who, ": ", key, " names parameter ", i, ", the optimizer has ",
                params.size());
    return params[i];
  };
  for (const auto& [key, text] : sd.metadata) {
    auto parsed = parse_state_key(key);
    if (!parsed) continue;
    EMBER_CHECK(parsed->second == "step" && counts_steps(), who, ": unexpected entry ", key);
    const Tensor& p = param_of(parsed->first, key);
    // Placed where the next step expects it; init_state moves it if the group's choice differs.
    loaded[parsed->first].step =
        full({}, parse_number(who, key, text), TensorOptions(kFloat32).device(p.device()));
  }
  for (const auto& [key, t] : sd.tensors) {
    auto parsed = parse_state_key(key);
    EMBER_CHECK(parsed, who, ": unexpected tensor ", key);
    const auto [i, buffer] = *parsed;
    const Tensor& p = param_of(i, key);
    std::vector<std::string> names = state_buffer_names(*options_of_param[i]);
    EMBER_CHECK(std::find(names.begin(), names.end(), buffer) != names.end(), who, ": unexpected tensor ",
                key, " (parameter ", i, "'s state holds no ", buffer, " with these options)");
    EMBER_CHECK(t.sizes().equals(p.sizes()), who, ": ", key, " has shape ", t.sizes(), ", parameter ", i,
                " has shape ", p.sizes());
    loaded[i].buffers.insert(buffer, t.to(p.device(), p.dtype(), /*non_blocking=*/false, /*copy=*/true));
  }
  if (counts_steps()) {
    for (const auto& [i, s] : loaded) {
      EMBER_CHECK(s.step.defined(), who, ": the state of parameter ", i, " has no step count (state.", i,
                  ".step)");
      for (const std::string& buffer : state_buffer_names(*options_of_param[i]))
        EMBER_CHECK(s.buffers.contains(buffer), who, ": the state of parameter ", i, " has no ", buffer,
                    " (state.", i, ".", buffer, ")");
    }
  }

  for (size_t gi = 0; gi < ngroups; ++gi) groups_[gi].set_options(std::move(options[gi]));
  state_.clear();
  for (auto& [i, s] : loaded) state_[params[i].unsafe_impl()] = std::move(s);
}

std::vector<Tensor> Optimizer::kept_casts(const std::vector<Tensor>& params) {
  std::vector<Tensor> casts;
  casts.reserve(params.size());
  std::optional<ScalarType> dtype;
  for (const Tensor& p : params) {
    Tensor cast = amp::detail::kept_cast(p);
    // One step writes casts of one dtype; the others (regions of another autocast dtype) go stale
    // and are cast again.
    if (cast.defined() && dtype && cast.dtype() != *dtype) cast = Tensor();
    if (cast.defined()) dtype = cast.dtype();
    casts.push_back(std::move(cast));
  }
  if (!dtype) casts.clear();
  return casts;
}

void Optimizer::kept_casts_written(const std::vector<Tensor>& params, const std::vector<Tensor>& casts) {
  for (size_t i = 0; i < casts.size(); ++i)
    if (casts[i].defined()) amp::detail::kept_cast_written(params[i]);
}

}  // namespace ember::optim
