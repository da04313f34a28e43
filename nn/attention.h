#pragma once

// MultiheadAttention, as torch.nn.MultiheadAttention (PyTorch's parameter names, masks and
// layouts), computed with core's scaled_dot_product_attention.

#include <tuple>

#include "ember/nn/linear.h"
#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  EMBER_ARG(int64_t, embed_dim);
  EMBER_ARG(int64_t, num_heads);         // must divide embed_dim
  EMBER_ARG(double, dropout) = 0.0;      // on the attention weights, in training
  EMBER_ARG(bool, bias) = true;          // in_proj_bias and out_proj.bias
  EMBER_ARG(bool, batch_first) = false;  // inputs [N, L, E] rather than [L, N, E]
};

// Inputs are [L, N, E] ([N, L, E] with batch_first) or unbatched [L, E]; query has L positions,
// key and value S.
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  // PyTorch's: xavier_uniform_ in_proj_weight, zero biases (out_proj.weight keeps Linear's init).
  void reset_parameters();

  // Returns (output like query, attention weights or undefined without need_weights). The
  // weights are [N, L, S], averaged over heads, or [N, num_heads, L, S] without
  // average_attn_weights. Masks are bool (true = not allowed to attend) or floating (added to
  // the scores): key_padding_mask [N, S] (unbatched [S]); attn_mask [L, S] or
  // [N * num_heads, L, S]. is_causal alone masks key j > query i; with an attn_mask it is only a
  // hint that the mask is causal, as in PyTorch.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false);

  MultiheadAttentionOptions options;
  Tensor in_proj_weight;  // [3 E, E]: the query, key and value projections stacked
  Tensor in_proj_bias;    // [3 E]; undefined without bias
  Linear out_proj{nullptr};
};
EMBER_MODULE(MultiheadAttention);

}  // namespace ember::nn
