#include "ember/examples/models/bert.h"

#include <ember/distributed/parallel_linear.h>
#include <ember/distributed/parallel_regions.h>
#include <ember/distributed/parallel_transformer.h>
#include <ember/distributed/vocab_parallel.h>

namespace ember::models {

namespace dist = ember::distributed;

BertLikeImpl::BertLikeImpl(const BertLikeOptions& options) : Module("BertLike"), options(options) {
  const std::shared_ptr<dist::ProcessGroup>& tp = options.tensor_parallel();
  const int64_t vocab = options.vocab_size(), d = options.d_model();
  const int64_t stage = options.stage(), stages = options.stages(), n_layers = options.layers();
  EMBER_CHECK(stages >= 1 && stage >= 0 && stage < stages && stages <= n_layers, "BertLike: pipeline stage ",
              stage, " of ", stages, " does not fit ", n_layers, " layers");
  const bool sp = options.sequence_parallel();
  EMBER_CHECK(!sp || tp, "BertLike: sequence_parallel needs tensor_parallel (a group)");
  const bool first = stage == 0, last = stage == stages - 1;
  // This stage's layers: consecutive, the first (n_layers % stages) stages one more.
  const int64_t base = n_layers / stages, extra = n_layers % stages;
  const int64_t begin = stage * base + std::min(stage, extra), end = begin + base + (stage < extra ? 1 : 0);
  // Every module is made, in the whole model's order, so the same seed draws the same weights on
  // every stage; a stage registers and keeps only its own.
  auto keep = [&](bool mine, const std::string& name, auto module) {
    if (mine) register_module(name, module);
    return module;
  };
  if (tp) {
    auto tok = keep(first, "tok",
                    dist::VocabParallelEmbedding(dist::VocabParallelEmbeddingOptions(vocab, d).group(tp)));
    if (first) embed_tokens_ = [tok](const Tensor& ids) { return tok(ids); };
  } else {
    auto tok = keep(first, "tok", nn::Embedding(vocab, d));
    if (first) embed_tokens_ = [tok](const Tensor& ids) { return tok(ids); };
  }
  auto made_pos = nn::Embedding(options.max_positions(), d);
  auto made_norm = nn::LayerNorm(nn::LayerNormOptions({d}).eps(1e-12));
  auto made_drop = nn::Dropout(options.dropout());
  if (first) {
    pos = register_module("pos", made_pos);
    norm = register_module("norm", made_norm);
    drop = register_module("drop", made_drop);
  }
  layers = register_module("layers", nn::ModuleDict());
  auto layer_options = nn::TransformerEncoderLayerOptions(d, options.heads())
                           .dim_feedforward(options.dim_feedforward())
                           .dropout(options.dropout())
                           .activation("gelu")
                           .batch_first(true)
                           .norm_first(false);
  // Each closure keeps its layer alive (checkpointing runs it again in backward).
  auto add_layer = [&](int64_t i, auto layer) {
    if (i < begin || i >= end) return;
    layers->insert(std::to_string(i), layer);
    layer_forwards_.push_back([layer](const Tensor& x) { return layer->forward(x); });
  };
  for (int64_t i = 0; i < n_layers; ++i) {
    if (tp)
      add_layer(i, dist::ParallelTransformerEncoderLayer(layer_options, tp, sp));
    else
      add_layer(i, nn::TransformerEncoderLayer(layer_options));
  }
  if (tp) {
    auto head = keep(last, "head",
                     dist::ColumnParallelLinear(dist::ColumnParallelLinearOptions(d, vocab)
                                                    .gather_output(false)
                                                    .sequence_parallel(sp)
                                                    .sequence_dim(1)
                                                    .group(tp)));
    if (last)
      head_loss_ = [head, tp](const Tensor& x, const Tensor& labels) {
        const Tensor logits = head(x);  // this rank's share of the vocabulary
        return dist::vocab_parallel_cross_entropy(logits.view({-1, logits.size(-1)}), labels.view({-1}), -100,
                                                  "mean", tp);
      };
  } else {
    auto head = keep(last, "head", nn::Linear(d, vocab));
    if (last)
      head_loss_ = [head, vocab](const Tensor& x, const Tensor& labels) {
        return cross_entropy(head(x).view({-1, vocab}), labels.view({-1}));
      };
  }
}

Tensor BertLikeImpl::run_layers(Tensor x, bool checkpoint) {
  for (const auto& layer : layer_forwards_) x = checkpoint ? autograd::checkpoint(layer, x) : layer(x);
  return x;
}

Tensor BertLikeImpl::forward(const Tensor& ids, const Tensor& positions, const Tensor& labels,
                             bool checkpoint) {
  EMBER_CHECK(options.stages() == 1, "BertLike::forward: this is pipeline stage ", options.stage(), " of ",
              options.stages(), "; run it with forward_stage (and loss on the last)");
  return head_loss_(run_layers(embed(ids, positions), checkpoint), labels);
}

Tensor BertLikeImpl::embed(const Tensor& ids, const Tensor& positions) {
  const Tensor x = norm(embed_tokens_(ids) + pos(positions));
  // The embeddings' LayerNorm runs on the whole sequence (its gradients whole on every rank); from
  // the dropout on, each rank keeps its slice.
  if (!options.sequence_parallel()) return drop(x);
  return drop(dist::scatter_to_sequence_parallel_region(x, 1, options.tensor_parallel()));
}

Tensor BertLikeImpl::forward_stage(const Tensor& input, bool checkpoint) {
  if (!embed_tokens_) return run_layers(input, checkpoint);
  EMBER_CHECK(input.dim() == 2, "BertLike::forward_stage: the first stage takes ids [batch, seq], got ",
              input.sizes());
  const Tensor positions = arange(input.size(1), TensorOptions(kInt64).device(input.device()));
  return run_layers(embed(input, positions), checkpoint);
}

Tensor BertLikeImpl::loss(const Tensor& hidden, const Tensor& labels) {
  EMBER_CHECK(head_loss_, "BertLike::loss: the head is on the last pipeline stage, not on stage ",
              options.stage(), " of ", options.stages());
  return head_loss_(hidden, labels);
}

}  // namespace ember::models
