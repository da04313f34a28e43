#include "ember/examples/common/param_groups.h"

#include <ember/core/error.h>

namespace ember::examples {
namespace {

// Sets the "weight_decay" option of any optimizer's options.
class SetWeightDecay : public optim::OptionVisitor {
 public:
  explicit SetWeightDecay(double v) : v_(v) {}
  void operator()(const char* name, double& value) override {
    if (std::string(name) == "weight_decay") {
      value = v_;
      found = true;
    }
  }
  void operator()(const char*, bool&) override {}
  void operator()(const char*, std::tuple<double, double>&) override {}
  void operator()(const char*, std::optional<bool>&) override {}
  bool found = false;

 private:
  double v_;
};

}  // namespace

std::vector<optim::OptimizerParamGroup> make_param_groups(const nn::Module& model,
                                                          const optim::OptimizerOptions& defaults,
                                                          const ParamGroupOptions& options) {
  // [head][decay]
  std::vector<Tensor> params[2][2];
  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;
    const bool head = !options.head_prefix.empty() && name.rfind(options.head_prefix, 0) == 0;
    params[head][p.dim() > 1].push_back(p);
  }
  std::vector<optim::OptimizerParamGroup> groups;
  for (int head = 0; head < 2; ++head) {
    for (int decay = 0; decay < 2; ++decay) {
      if (params[head][decay].empty()) continue;
      auto group_options = defaults.clone();
      group_options->set_lr(defaults.get_lr() *
                            (head || options.head_prefix.empty() ? 1 : options.backbone_lr_scale));
      SetWeightDecay set(decay ? options.weight_decay : 0);
      group_options->visit(set);
      EMBER_CHECK(set.found, "make_param_groups: ", defaults.optimizer_name(), " has no weight_decay option");
      groups.emplace_back(std::move(params[head][decay]), std::move(group_options));
    }
  }
  EMBER_CHECK(!groups.empty(), "make_param_groups: the model has no trainable parameters");
  return groups;
}

}  // namespace ember::examples
