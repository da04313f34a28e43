#pragma once

// Dropout: in training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p) (default generator); the identity in eval.

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}
  EMBER_ARG(double, p);
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  DropoutOptions options;
};
EMBER_MODULE(Dropout);

}  // namespace ember::nn
