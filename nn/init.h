#pragma once

// Parameter initialisation, as torch.nn.init: in-place fills under no_grad that draw from `gen`
// (the device's default, seeded generator when null) and return the tensor.

#include <cstdint>
#include <optional>
#include <string_view>

#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember::nn::init {

// The recommended gain for a nonlinearity: "linear", "conv1d", "conv2d", "conv3d",
// "conv_transpose1d/2d/3d" and "sigmoid" give 1, "tanh" 5/3, "relu" sqrt(2), "leaky_relu"
// sqrt(2 / (1 + slope^2)) with slope = param (default 0.01), "selu" 3/4.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

// For a weight [out, in, *kernel]: fan_in = in * prod(kernel), fan_out = out * prod(kernel).
struct Fans {
  int64_t fan_in, fan_out;
};
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

const Tensor& uniform_(const Tensor& tensor, double a = 0, double b = 1, Generator* gen = nullptr);
const Tensor& normal_(const Tensor& tensor, double mean = 0, double std = 1, Generator* gen = nullptr);
// Normal draws redrawn until they lie in [a, b].
const Tensor& trunc_normal_(const Tensor& tensor, double mean = 0, double std = 1, double a = -2,
                            double b = 2, Generator* gen = nullptr);
const Tensor& constant_(const Tensor& tensor, double value);
const Tensor& ones_(const Tensor& tensor);
const Tensor& zeros_(const Tensor& tensor);

// Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); normal with std =
// gain * sqrt(2 / (fan_in + fan_out)).
const Tensor& xavier_uniform_(const Tensor& tensor, double gain = 1, Generator* gen = nullptr);
const Tensor& xavier_normal_(const Tensor& tensor, double gain = 1, Generator* gen = nullptr);
// He: std = gain / sqrt(fan) with gain = calculate_gain(nonlinearity, a) and fan chosen by mode
// ("fan_in" or "fan_out"); the uniform variant draws U(-sqrt(3) std, sqrt(3) std). A tensor
// with no elements is left as it is.
const Tensor& kaiming_uniform_(const Tensor& tensor, double a = 0, std::string_view mode = "fan_in",
                               std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);
const Tensor& kaiming_normal_(const Tensor& tensor, double a = 0, std::string_view mode = "fan_in",
                              std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);

}  // namespace ember::nn::init
