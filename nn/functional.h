#pragma once

// torch.nn.functional: `namespace F = ember::nn::functional;` then F::linear, F::relu, ... The
// core ops are re-exported under their PyTorch names; the rest are composites of
// differentiable core ops, so they run on any device and have a backward.

#include <optional>
#include <string_view>

#include "ember/core/ops/attention.h"
#include "ember/core/ops/convolution.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/normalization.h"
#include "ember/core/ops/pooling.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/ops/softmax.h"

namespace ember::nn::functional {

using ember::adaptive_avg_pool2d;
using ember::adaptive_avg_pool3d;
using ember::avg_pool2d;
using ember::avg_pool3d;
using ember::batch_norm;
using ember::binary_cross_entropy_with_logits;
using ember::conv1d;
using ember::conv2d;
using ember::conv3d;
using ember::conv_transpose2d;
using ember::cross_entropy;
using ember::dropout;
using ember::embedding;
using ember::gelu;
using ember::group_norm;
using ember::layer_norm;
using ember::leaky_relu;
using ember::log_softmax;
using ember::max_pool2d;
using ember::max_pool2d_with_indices;
using ember::max_pool3d;
using ember::mse_loss;
using ember::nll_loss;
using ember::one_hot;
using ember::pad;
using ember::relu;
using ember::scaled_dot_product_attention;
using ember::sigmoid;
using ember::silu;
using ember::softmax;
using ember::softplus;
using ember::tanh;

// input [*, in] @ weight [out, in]^T + bias [out] -> [*, out].
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});
// |input - target|, the two broadcast together; reduction "none", "mean" or "sum".
Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
// 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean",
                      double beta = 1.0);
// -weight * (target * log(input) + (1 - target) * log(1 - input)) for probabilities `input` and
// a target of its size, each log clamped at -100 as PyTorch's (a probability of exactly 0 or 1
// costs 100, and its gradient stays finite); weight broadcasts to the input. Inputs outside
// [0, 1] give NaN (checking them would read the GPU back).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            std::string_view reduction = "mean");
// The KL divergence of `input` (log-probabilities) from `target` (probabilities, or
// log-probabilities with log_target), pointwise target * (log(target) - input), 0 where target is
// 0; reduction "none", "mean" (over elements), "sum" or "batchmean" (the sum over input.size(0),
// the true KL divergence of a batch).
Tensor kl_div(const Tensor& input, const Tensor& target, std::string_view reduction = "mean",
              bool log_target = false);
// x / sqrt(mean(x^2) + eps) over the trailing dims `normalized_shape`, times weight (that shape,
// optional). Computes in float32 for half inputs; eps defaults to the compute dtype's epsilon.
Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

// input / max(||input||_p over dim, eps), as F.normalize.
Tensor normalize(const Tensor& input, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// The cosine of the angle between x1 and x2 (broadcast together) along dim: each divided by its
// 2-norm (at least eps), then their dot product, as F.cosine_similarity.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// min(max(x, 0), 6) and x * relu6(x + 3) / 6, as F.relu6 and F.hardswish.
Tensor relu6(const Tensor& input);
Tensor hardswish(const Tensor& input);

}  // namespace ember::nn::functional
