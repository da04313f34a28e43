#pragma once

// torch.nn.utils.rnn.pad_sequence.
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::nn::utils::rnn {

// Sequences [L_i, *] (the same trailing dims, dtype and device) padded with `padding_value` to the
// longest and stacked: [B, L, *] when batch_first, else [L, B, *]. padding_side "right" (the
// default) pads after each sequence, "left" before. Differentiable in the sequences.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0,
                    const std::string& padding_side = "right");

}  // namespace ember::nn::utils::rnn
