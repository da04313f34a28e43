#pragma once

// Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p).

#include <tuple>

#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// Returns x itself when !training or p == 0, zeros when p == 1. The mask is a Bernoulli draw
// from `gen` (default: the device's default generator).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// (out, mask) with mask a bool tensor of x's shape, true where the element was kept (all true
// when !training), as PyTorch's native_dropout; the backward is grad * mask / (1 - p).
std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training = true,
                                          Generator* gen = nullptr);

}  // namespace ember
