#pragma once

// The parameter groups of torchvision's and Hugging Face's training recipes: no weight decay on
// biases and normalization weights (every parameter of one dimension), and, for fine-tuning, the
// backbone at a fraction of the head's learning rate. Frozen parameters (requires_grad false)
// are left out.
#include <string>
#include <vector>

#include <ember/nn/module.h>
#include <ember/optim/optimizer.h>

namespace ember::examples {

struct ParamGroupOptions {
  double weight_decay = 0;
  // Parameters whose names start with it are the head; the rest is the backbone.
  std::string head_prefix;
  double backbone_lr_scale = 1;
};

// Up to four groups (backbone and head, each with and without decay), empty ones dropped; each
// with a copy of `defaults` whose lr and weight_decay are set for the group.
std::vector<optim::OptimizerParamGroup> make_param_groups(const nn::Module& model,
                                                          const optim::OptimizerOptions& defaults,
                                                          const ParamGroupOptions& options);

}  // namespace ember::examples
