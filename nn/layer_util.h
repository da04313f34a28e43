#pragma once

// Checks and helpers the layers share (not public API).

#include <initializer_list>
#include <optional>
#include <string>

#include "ember/core/tensor.h"

namespace ember::nn::detail {

// Throws "Conv2d: expected 3D (unbatched) or 4D (batched) input, got 2D input [3, 4]" unless
// input.dim() is one of `dims`.
void check_input_dim(const char* layer, const Tensor& input, std::initializer_list<int64_t> dims,
                     const char* expected);
// Throws "Linear: input has 5 features, expected 4 (input [2, 5])" unless input.size(dim) == n.
void check_input_size(const char* layer, const Tensor& input, int64_t dim, int64_t n, const char* what);
// Throws "LayerNorm: expected input with trailing dims [4], got input [2, 5]".
void check_trailing_dims(const char* layer, const Tensor& input, IntArrayRef shape);
// A norm layer's normalized_shape: at least one dim, none negative.
void check_normalized_shape(const char* layer, IntArrayRef shape);
// Throws unless input has the parameter's dtype (unless autocast is on for its device) and device
// (the layer's weight).
void check_like_param(const char* layer, const Tensor& input, const Tensor& param);
// Linear's and Conv's default: kaiming_uniform_(a = sqrt(5)) for the weight and
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias (if defined).
void reset_fan_in_uniform(const Tensor& weight, const Tensor& bias);

inline const char* bool_str(bool b) { return b ? "true" : "false"; }
// Python's tuple: "(4,)", "(2, 3)".
std::string tuple_str(IntArrayRef sizes);
// A single number when all are equal ("2"), else a tuple, as PyTorch prints pooling sizes.
std::string size_str(IntArrayRef sizes);
// An optional double as Python prints it ("0.1" or "None").
std::string optional_str(std::optional<double> v);

}  // namespace ember::nn::detail
