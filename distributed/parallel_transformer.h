#pragma once

// Megatron-LM's parallel self-attention and MLP: nn::TransformerEncoderLayer split over the ranks
// of a group, heads and feed-forward units evenly.
// - ParallelSelfAttention: rank r holds heads [r * H/W, (r+1) * H/W): its rows of each of the
//   packed q, k and v projections (in_proj_weight [3 E / W, E], three blocks) and the matching
//   columns of the output projection (a RowParallelLinear).
// - ParallelTransformerEncoderLayer: that attention, a ColumnParallelLinear and RowParallelLinear
//   feed-forward, and LayerNorm and the residual dropouts on every rank.
// Each block costs one all-reduce forward and one backward. With sequence_parallel (parallel_regions.h)
// the layer's input and output are this rank's slice of the sequence ([N, L / W, E] batch first,
// [L / W, N, E] otherwise): each block all-gathers its input and reduce-scatters its output, and
// LayerNorm, the dropouts and the residual adds run on 1/W of the tokens; the LayerNorms' and the
// output projections' biases then sum their gradients over the group. The dropouts draw each
// rank's own tokens' masks (a single process draws other numbers). Submodule and parameter names are
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
                            const std::shared_ptr<ProcessGroup>& group = nullptr,
                            bool sequence_parallel = false);
  // x [N, L, E] -> [N, L, E] (with sequence_parallel, [N, L / W, E] -> [N, L / W, E]);
  // key_padding_mask [N, L] (the whole sequence), true where a key is padding.
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
  bool sequence_parallel_;
};
EMBER_MODULE(ParallelSelfAttention);

class ParallelTransformerEncoderLayerImpl : public nn::Module {
 public:
  explicit ParallelTransformerEncoderLayerImpl(const nn::TransformerEncoderLayerOptions& options,
                                               const std::shared_ptr<ProcessGroup>& group = nullptr,
                                               bool sequence_parallel = false);
  // src [N, L, E] with batch_first, else [L, N, E] (L / W with sequence_parallel); src_key_padding_mask
  // [N, L], the whole sequence.
  Tensor forward(const Tensor& src, const Tensor& src_key_padding_mask = {});

  nn::TransformerEncoderLayerOptions options;
  ParallelSelfAttention self_attn{nullptr};
  ColumnParallelLinear linear1{nullptr};
  nn::Dropout dropout{nullptr};
  RowParallelLinear linear2{nullptr};
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  nn::Dropout dropout1{nullptr}, dropout2{nullptr};

 private:
  Tensor norm(const nn::LayerNorm& m, const Tensor& x) const;

  std::shared_ptr<ProcessGroup> group_;
  bool sequence_parallel_;
};
EMBER_MODULE(ParallelTransformerEncoderLayer);

}  // namespace ember::distributed
