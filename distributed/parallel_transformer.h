#pragma once

// Megatron-LM's parallel self-attention and MLP: nn::TransformerEncoderLayer split over the ranks
// of a group, heads and feed-forward units evenly.
// - ParallelSelfAttention: rank r holds heads [r * H/W, (r+1) * H/W): its rows of each of the
//   packed q, k and v projections (in_proj_weight [3 E / W, E], three blocks) and the matching
//   columns of the output projection (a RowParallelLinear).
// - ParallelTransformerEncoderLayer: that attention, a ColumnParallelLinear and RowParallelLinear
//   feed-forward, and LayerNorm and the residual dropouts on every rank.
// Each block costs one all-reduce forward and one backward. Submodule and parameter names are
// nn::TransformerEncoderLayer's, so load_full_state_dict takes its state dict, and the draws of
// its initialization are the same (the same seed gives the same layer, split).
//
//   auto layer = distributed::ParallelTransformerEncoderLayer(
//       nn::TransformerEncoderLayerOptions(768, 12).dim_feedforward(3072).batch_first(true), tp_group);

#include <memory>

#include "ember/distributed/parallel_linear.h"
#include "ember/distributed/tensor_parallel_state.h"
#include "ember/nn/dropout.h"
#include "ember/nn/normalization.h"
#include "ember/nn/transformer.h"

namespace ember::distributed {

class ParallelSelfAttentionImpl : public nn::Module, public TensorParallelShards {
 public:
  // num_heads must divide by the group's size. `dropout` applies to the attention weights, drawn
  // on each rank for its own heads.
  ParallelSelfAttentionImpl(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                            const std::shared_ptr<ProcessGroup>& group = nullptr);
  // x [N, L, E] -> [N, L, E]; key_padding_mask [N, L], true where a key is padding.
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = {});
  std::optional<ShardSpec> shard_spec(const std::string& name) const override;
  const std::shared_ptr<ProcessGroup>& shard_group() const override { return group_; }

  int64_t embed_dim, num_heads;
  double dropout;
  Tensor in_proj_weight;  // [3 E / W, E]: this rank's heads of q, then of k, then of v
  Tensor in_proj_bias;    // [3 E / W]; undefined without bias
  RowParallelLinear out_proj{nullptr};

 private:
  std::shared_ptr<ProcessGroup> group_;
};
EMBER_MODULE(ParallelSelfAttention);

class ParallelTransformerEncoderLayerImpl : public nn::Module {
 public:
  explicit ParallelTransformerEncoderLayerImpl(const nn::TransformerEncoderLayerOptions& options,
                                               const std::shared_ptr<ProcessGroup>& group = nullptr);
  // src [N, L, E] with batch_first, else [L, N, E]; src_key_padding_mask [N, L].
  Tensor forward(const Tensor& src, const Tensor& src_key_padding_mask = {});

  nn::TransformerEncoderLayerOptions options;
  ParallelSelfAttention self_attn{nullptr};
  ColumnParallelLinear linear1{nullptr};
  nn::Dropout dropout{nullptr};
  RowParallelLinear linear2{nullptr};
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  nn::Dropout dropout1{nullptr}, dropout2{nullptr};
};
EMBER_MODULE(ParallelTransformerEncoderLayer);

}  // namespace ember::distributed
