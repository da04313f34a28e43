#pragma once

// Activation modules: ReLU, ReLU6, LeakyReLU, Hardswish, GELU, SiLU, Tanh, Sigmoid, Softmax.

#include <string>

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}
  EMBER_ARG(bool, inplace);  // overwrite the input (which must not need its value for backward)
};

class ReLUImpl : public Module {
 public:
  explicit ReLUImpl(const ReLUOptions& options = {}) : Module("ReLU"), options(options) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  ReLUOptions options;
};
EMBER_MODULE(ReLU);

// min(max(x, 0), 6).
class ReLU6Impl : public Module {
 public:
  ReLU6Impl() : Module("ReLU6") {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(ReLU6);

struct LeakyReLUOptions {
  EMBER_ARG(double, negative_slope) = 0.01;
};

// x where x >= 0, else negative_slope * x.
class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : Module("LeakyReLU"), options(options) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  LeakyReLUOptions options;
};
EMBER_MODULE(LeakyReLU);

// x * relu6(x + 3) / 6.
class HardswishImpl : public Module {
 public:
  HardswishImpl() : Module("Hardswish") {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(Hardswish);

struct GELUOptions {
  // "none" (the exact erf form) or "tanh" (the tanh approximation).
  EMBER_ARG(std::string, approximate) = "none";
};

class GELUImpl : public Module {
 public:
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  GELUOptions options;
};
EMBER_MODULE(GELU);

// x * sigmoid(x).
class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(SiLU);

class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(Tanh);

class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& input);
};
EMBER_MODULE(Sigmoid);

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}
  EMBER_ARG(int64_t, dim);
};

class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options) : Module("Softmax"), options(options) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  SoftmaxOptions options;
};
EMBER_MODULE(Softmax);

}  // namespace ember::nn
