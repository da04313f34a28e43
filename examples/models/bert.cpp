#include "ember/examples/models/bert.h"

#include <ember/distributed/parallel_linear.h>
#include <ember/distributed/parallel_transformer.h>
#include <ember/distributed/vocab_parallel.h>

namespace ember::models {

namespace dist = ember::distributed;

BertLikeImpl::BertLikeImpl(const BertLikeOptions& options) : Module("BertLike"), options(options) {
  const std::shared_ptr<dist::ProcessGroup>& tp = options.tensor_parallel();
  const int64_t vocab = options.vocab_size(), d = options.d_model();
  // Registered in the single-process model's order, so the same seed draws the same weights.
  if (tp) {
    auto tok = register_module(
        "tok", dist::VocabParallelEmbedding(dist::VocabParallelEmbeddingOptions(vocab, d).group(tp)));
    embed_tokens_ = [tok](const Tensor& ids) { return tok(ids); };
  } else {
    auto tok = register_module("tok", nn::Embedding(vocab, d));
    embed_tokens_ = [tok](const Tensor& ids) { return tok(ids); };
  }
  pos = register_module("pos", nn::Embedding(options.max_positions(), d));
  norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({d}).eps(1e-12)));
  drop = register_module("drop", nn::Dropout(options.dropout()));
  layers = register_module("layers", nn::ModuleList());
  auto layer_options = nn::TransformerEncoderLayerOptions(d, options.heads())
                           .dim_feedforward(options.dim_feedforward())
                           .dropout(options.dropout())
                           .activation("gelu")
                           .batch_first(true)
                           .norm_first(false);
  // Each closure keeps its layer alive (checkpointing runs it again in backward).
  auto add_layer = [&](auto layer) {
    layers->push_back(layer);
    layer_forwards_.push_back([layer](const Tensor& x) { return layer->forward(x); });
  };
  for (int64_t i = 0; i < options.layers(); ++i) {
    if (tp)
      add_layer(dist::ParallelTransformerEncoderLayer(layer_options, tp));
    else
      add_layer(nn::TransformerEncoderLayer(layer_options));
  }
  if (tp) {
    auto head = register_module(
        "head", dist::ColumnParallelLinear(
                    dist::ColumnParallelLinearOptions(d, vocab).gather_output(false).group(tp)));
    head_loss_ = [head, tp](const Tensor& x, const Tensor& labels) {
      const Tensor logits = head(x);  // this rank's share of the vocabulary
      return dist::vocab_parallel_cross_entropy(logits.view({-1, logits.size(-1)}), labels.view({-1}), -100,
                                                "mean", tp);
    };
  } else {
    auto head = register_module("head", nn::Linear(d, vocab));
    head_loss_ = [head, vocab](const Tensor& x, const Tensor& labels) {
      return cross_entropy(head(x).view({-1, vocab}), labels.view({-1}));
    };
  }
}

Tensor BertLikeImpl::forward(const Tensor& ids, const Tensor& positions, const Tensor& labels,
                             bool checkpoint) {
  Tensor x = drop(norm(embed_tokens_(ids) + pos(positions)));
  for (const auto& layer : layer_forwards_) x = checkpoint ? autograd::checkpoint(layer, x) : layer(x);
  return head_loss_(x, labels);
}

}  // namespace ember::models
