#include "ember/nn/init.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/random.h"

namespace ember::nn::init {
namespace {

int64_t correct_fan(const char* op, const Tensor& tensor, std::string_view mode) {
  EMBER_CHECK(mode == "fan_in" || mode == "fan_out", op, ": mode must be \"fan_in\" or \"fan_out\", got \"",
              mode, "\"");
  Fans fans = calculate_fan_in_and_fan_out(tensor);
  return mode == "fan_in" ? fans.fan_in : fans.fan_out;
}

double xavier_std(const Tensor& tensor, double gain) {
  Fans fans = calculate_fan_in_and_fan_out(tensor);
  return gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
}

// The kaiming std, or nullopt for a tensor with no elements (nothing to draw).
std::optional<double> kaiming_std(const char* op, const Tensor& tensor, double a, std::string_view mode,
                                  std::string_view nonlinearity) {
  if (tensor.numel() == 0) return std::nullopt;
  int64_t fan = correct_fan(op, tensor, mode);
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}

}  // namespace

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  for (std::string_view linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  throw Error(ember::detail::str_cat("calculate_gain: unsupported nonlinearity \"", nonlinearity, "\""));
}

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) {
  EMBER_CHECK(tensor.dim() >= 2,
              "calculate_fan_in_and_fan_out: fan in and fan out can not be computed for a tensor with fewer "
              "than 2 dimensions, got shape ",
              tensor.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

const Tensor& uniform_(const Tensor& tensor, double a, double b, Generator* gen) {
  NoGradGuard no_grad;
  return ember::uniform_(tensor, a, b, gen);
}

const Tensor& normal_(const Tensor& tensor, double mean, double stddev, Generator* gen) {
  NoGradGuard no_grad;
  return ember::normal_(tensor, mean, stddev, gen);
}

const Tensor& trunc_normal_(const Tensor& tensor, double mean, double stddev, double a, double b,
                            Generator* gen) {
  EMBER_CHECK(a < b && stddev > 0, "trunc_normal_: expects a < b and std > 0, got a=", a, " b=", b,
              " std=", stddev);
  NoGradGuard no_grad;
  auto norm_cdf = [](double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; };
  auto outside = [&](const Tensor& t) { return t.lt(a).logical_or(t.gt(b)); };
  Tensor result;
  if (norm_cdf((b - mean) / stddev) - norm_cdf((a - mean) / stddev) > 0.3) {
    // Most normal draws land inside: redraw the others.
    result = ember::normal_(empty_like(tensor), mean, stddev, gen);
    for (Tensor redo = outside(result); redo.any().item<bool>(); redo = outside(result))
      result = where(redo, ember::normal_(empty_like(tensor), mean, stddev, gen), result);
  } else {
    // A narrow window: uniform proposals on [a, b], accepted with probability pdf / peak pdf.
    double mode = std::max(a, std::min(mean, b));
    double log_peak = -0.5 * std::pow((mode - mean) / stddev, 2);
    auto rejected = [&](const Tensor& x) {
      Tensor log_pdf = ((x - mean) / stddev).square() * -0.5 - log_peak;
      return ember::uniform_(empty_like(x), 0, 1, gen).log().gt(log_pdf);
    };
    result = ember::uniform_(empty_like(tensor), a, b, gen);
    for (Tensor redo = rejected(result); redo.any().item<bool>();) {
      Tensor proposal = ember::uniform_(empty_like(tensor), a, b, gen);
      result = where(redo, proposal, result);
      redo = redo.logical_and(rejected(proposal));
    }
  }
  return tensor.copy_(result);
}

const Tensor& constant_(const Tensor& tensor, double value) {
  NoGradGuard no_grad;
  return tensor.fill_(value);
}

const Tensor& ones_(const Tensor& tensor) { return constant_(tensor, 1); }
const Tensor& zeros_(const Tensor& tensor) { return constant_(tensor, 0); }

const Tensor& xavier_uniform_(const Tensor& tensor, double gain, Generator* gen) {
  double bound = std::sqrt(3.0) * xavier_std(tensor, gain);
  return init::uniform_(tensor, -bound, bound, gen);
}

const Tensor& xavier_normal_(const Tensor& tensor, double gain, Generator* gen) {
  return init::normal_(tensor, 0, xavier_std(tensor, gain), gen);
}

const Tensor& kaiming_uniform_(const Tensor& tensor, double a, std::string_view mode,
                               std::string_view nonlinearity, Generator* gen) {
  std::optional<double> stddev = kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity);
  if (!stddev) return tensor;
  double bound = std::sqrt(3.0) * *stddev;
  return init::uniform_(tensor, -bound, bound, gen);
}

const Tensor& kaiming_normal_(const Tensor& tensor, double a, std::string_view mode,
                              std::string_view nonlinearity, Generator* gen) {
  std::optional<double> stddev = kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity);
  return stddev ? init::normal_(tensor, 0, *stddev, gen) : tensor;
}

}  // namespace ember::nn::init
