#include "ember/examples/models/bert.h"

namespace ember::models {

BertLikeImpl::BertLikeImpl(const BertLikeOptions& options) : Module("BertLike"), options(options) {
  tok = register_module("tok", nn::Embedding(options.vocab_size(), options.d_model()));
  pos = register_module("pos", nn::Embedding(options.max_positions(), options.d_model()));
  norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({options.d_model()}).eps(1e-12)));
  drop = register_module("drop", nn::Dropout(options.dropout()));
  layers = register_module("layers", nn::ModuleList());
  auto layer_options = nn::TransformerEncoderLayerOptions(options.d_model(), options.heads())
                           .dim_feedforward(options.dim_feedforward())
                           .dropout(options.dropout())
                           .activation("gelu")
                           .batch_first(true)
                           .norm_first(false);
  for (int64_t i = 0; i < options.layers(); ++i)
    layers->push_back(nn::TransformerEncoderLayer(layer_options));
  head = register_module("head", nn::Linear(options.d_model(), options.vocab_size()));
}

Tensor BertLikeImpl::forward(const Tensor& ids, const Tensor& positions, const Tensor& labels,
                             bool checkpoint) {
  Tensor x = drop(norm(tok(ids) + pos(positions)));
  for (size_t i = 0; i < layers->size(); ++i) {
    // The recomputation runs in backward: the closure keeps the layer alive.
    auto layer = layers->ptr<nn::TransformerEncoderLayerImpl>(static_cast<int64_t>(i));
    x = checkpoint ? autograd::checkpoint([layer](const Tensor& t) { return layer->forward(t); }, x)
                   : layer->forward(x);
  }
  return cross_entropy(head(x).view({-1, options.vocab_size()}), labels.view({-1}));
}

}  // namespace ember::models
