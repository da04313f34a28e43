#include "ember/examples/models/bert_model.h"

#include <memory>

namespace ember::models {

namespace {

namespace F = nn::functional;

nn::LayerNorm layer_norm(const BertConfig& config) {
  return nn::LayerNorm(nn::LayerNormOptions({config.hidden_size()}).eps(config.layer_norm_eps()));
}

Tensor activate(BertActivation activation, const Tensor& x) {
  switch (activation) {
    case BertActivation::Gelu:
      return gelu(x);
    case BertActivation::GeluTanh:
      return gelu(x, "tanh");
    case BertActivation::Relu:
      return relu(x);
  }
  throw Error("BertModel: unknown activation");
}

// transformers' BertPreTrainedModel._init_weights on every Linear, Embedding and LayerNorm of m.
void init_weights(nn::Module& m, const BertConfig& config) {
  NoGradGuard no_grad;
  const double std = config.initializer_range();
  m.apply([std](nn::Module& sub) {
    if (auto* linear = dynamic_cast<nn::LinearImpl*>(&sub)) {
      nn::init::normal_(linear->weight, 0, std);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::EmbeddingImpl*>(&sub)) {
      nn::init::normal_(embedding->weight, 0, std);
      if (auto pad = embedding->options.padding_idx()) nn::init::zeros_(embedding->weight.select(0, *pad));
    } else if (auto* norm = dynamic_cast<nn::LayerNormImpl*>(&sub)) {
      nn::init::ones_(norm->weight);
      nn::init::zeros_(norm->bias);
    }
  });
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& config) : Module("BertEmbeddings") {
  const int64_t H = config.hidden_size();
  word_embeddings = register_module(
      "word_embeddings",
      nn::Embedding(nn::EmbeddingOptions(config.vocab_size(), H).padding_idx(config.pad_token_id())));
  position_embeddings =
      register_module("position_embeddings", nn::Embedding(config.max_position_embeddings(), H));
  token_type_embeddings =
      register_module("token_type_embeddings", nn::Embedding(config.type_vocab_size(), H));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
  dropout = register_module("dropout", nn::Dropout(config.hidden_dropout_prob()));
}

Tensor BertEmbeddingsImpl::forward(const Tensor& input_ids, const Tensor& token_type_ids) {
  const int64_t L = input_ids.size(1), max_positions = position_embeddings->options.num_embeddings();
  EMBER_CHECK(L <= max_positions, "BertModel: a sequence of ", L,
              " tokens is longer than max_position_embeddings ", max_positions);
  Tensor x = word_embeddings(input_ids) +
             position_embeddings(arange(L, TensorOptions(kInt64).device(input_ids.device())));
  // Without token types every token is type 0: add row 0 rather than gather it B * L times.
  x = token_type_ids.defined() ? x + token_type_embeddings(token_type_ids)
                               : x + token_type_embeddings->weight[0];
  return dropout(LayerNorm(x));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& config)
    : Module("BertSelfAttention"),
      heads_(config.num_attention_heads()),
      dropout_p_(config.attention_probs_dropout_prob()) {
  const int64_t H = config.hidden_size();
  query = register_module("query", nn::Linear(H, H));
  key = register_module("key", nn::Linear(H, H));
  value = register_module("value", nn::Linear(H, H));
}

Tensor BertSelfAttentionImpl::forward(const Tensor& x, const Tensor& key_mask) {
  const int64_t B = x.size(0), L = x.size(1), H = x.size(2);
  auto heads = [&](const Tensor& t) { return t.view({B, L, heads_, H / heads_}).transpose(1, 2); };
  Tensor context = scaled_dot_product_attention(heads(query(x)), heads(key(x)), heads(value(x)), key_mask,
                                                is_training() ? dropout_p_ : 0.0);
  return context.transpose(1, 2).reshape({B, L, H});
}

BertResidualOutputImpl::BertResidualOutputImpl(const BertConfig& config, int64_t in_features)
    : Module("BertOutput") {
  dense = register_module("dense", nn::Linear(in_features, config.hidden_size()));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
  dropout = register_module("dropout", nn::Dropout(config.hidden_dropout_prob()));
}

Tensor BertResidualOutputImpl::forward(const Tensor& x, const Tensor& residual) {
  return LayerNorm(dropout(dense(x)) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& config) : Module("BertAttention") {
  self = register_module("self", BertSelfAttention(config));
  output = register_module("output", BertResidualOutput(config, config.hidden_size()));
}

Tensor BertAttentionImpl::forward(const Tensor& x, const Tensor& key_mask) {
  return output(self(x, key_mask), x);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& config)
    : Module("BertIntermediate"), activation_(parse_bert_activation(config.hidden_act())) {
  dense = register_module("dense", nn::Linear(config.hidden_size(), config.intermediate_size()));
}

Tensor BertIntermediateImpl::forward(const Tensor& x) { return activate(activation_, dense(x)); }

BertLayerImpl::BertLayerImpl(const BertConfig& config) : Module("BertLayer") {
  attention = register_module("attention", BertAttention(config));
  intermediate = register_module("intermediate", BertIntermediate(config));
  output = register_module("output", BertResidualOutput(config, config.intermediate_size()));
}

Tensor BertLayerImpl::forward(const Tensor& x, const Tensor& key_mask) {
  Tensor a = attention(x, key_mask);
  return output(intermediate(a), a);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& config) : Module("BertEncoder") {
  layer = register_module("layer", nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers(); ++i) layer->push_back(BertLayer(config));
}

Tensor BertEncoderImpl::forward(const Tensor& x, const Tensor& key_mask, bool checkpoint) {
  Tensor h = x;
  for (size_t i = 0; i < layer->size(); ++i) {
    // The recomputation runs in backward: the closure keeps the layer and the mask alive.
    auto l = layer->ptr<BertLayerImpl>(static_cast<int64_t>(i));
    h = checkpoint
            ? autograd::checkpoint([l, key_mask](const Tensor& t) { return l->forward(t, key_mask); }, h)
            : l->forward(h, key_mask);
  }
  return h;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& config) : Module("BertPooler") {
  dense = register_module("dense", nn::Linear(config.hidden_size(), config.hidden_size()));
}

Tensor BertPoolerImpl::forward(const Tensor& hidden_states) {
  return tanh(dense(hidden_states.select(1, 0)));
}

BertModelImpl::BertModelImpl(const BertConfig& config, bool add_pooling_layer)
    : Module("BertModel"), config(config) {
  config.validate();
  embeddings = register_module("embeddings", BertEmbeddings(config));
  encoder = register_module("encoder", BertEncoder(config));
  if (add_pooling_layer) pooler = register_module("pooler", BertPooler(config));
  init_weights(*this, config);
}

BertOutput BertModelImpl::forward(const Tensor& input_ids, const Tensor& attention_mask,
                                  const Tensor& token_type_ids) {
  EMBER_CHECK(input_ids.dim() == 2, "BertModel: expected input_ids [batch, length], got ", input_ids.sizes());
  const int64_t B = input_ids.size(0), L = input_ids.size(1);
  for (const Tensor* t : {&attention_mask, &token_type_ids})
    EMBER_CHECK(!t->defined() || t->sizes().equals(input_ids.sizes()), "BertModel: expected ",
                t == &attention_mask ? "attention_mask" : "token_type_ids", " of input_ids' shape ",
                input_ids.sizes(), ", got ", t->sizes());
  // Padded keys are left out of every softmax (transformers adds a large negative number).
  Tensor key_mask = attention_mask.defined() ? (attention_mask != 0).view({B, 1, 1, L}) : Tensor();
  Tensor h = embeddings(input_ids, token_type_ids);
  h = encoder(h, key_mask, gradient_checkpointing_ && is_training());
  return {h, pooler ? pooler(h) : Tensor()};
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& config,
                                                                     int64_t num_labels)
    : Module("BertForSequenceClassification") {
  EMBER_CHECK(num_labels > 0, "BertForSequenceClassification: num_labels must be positive, got ", num_labels);
  bert = register_module("bert", BertModel(config));
  dropout = register_module("dropout",
                            nn::Dropout(config.classifier_dropout().value_or(config.hidden_dropout_prob())));
  classifier = register_module("classifier", nn::Linear(config.hidden_size(), num_labels));
  init_weights(*classifier, config);
}

Tensor BertForSequenceClassificationImpl::forward(const Tensor& input_ids, const Tensor& attention_mask,
                                                  const Tensor& token_type_ids) {
  return classifier(dropout(bert(input_ids, attention_mask, token_type_ids).pooler_output));
}

BertPredictionHeadTransformImpl::BertPredictionHeadTransformImpl(const BertConfig& config)
    : Module("BertPredictionHeadTransform"), activation_(parse_bert_activation(config.hidden_act())) {
  dense = register_module("dense", nn::Linear(config.hidden_size(), config.hidden_size()));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
}

Tensor BertPredictionHeadTransformImpl::forward(const Tensor& hidden_states) {
  return LayerNorm(activate(activation_, dense(hidden_states)));
}

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const BertConfig& config, const Tensor& word_embeddings)
    : Module("BertLMPredictionHead"), decoder_weight(word_embeddings) {
  bias = register_parameter("bias", zeros({config.vocab_size()}, word_embeddings.options()));
  transform = register_module("transform", BertPredictionHeadTransform(config));
  // transformers' decoder: a Linear whose weight and bias are the tensors above.
  auto decoder = std::make_shared<nn::Module>("Linear");
  decoder->register_parameter("weight", decoder_weight);
  decoder->register_parameter("bias", bias);
  register_module("decoder", decoder);
  init_weights(*transform, config);
}

Tensor BertLMPredictionHeadImpl::forward(const Tensor& hidden_states) {
  return F::linear(transform(hidden_states), decoder_weight, bias);
}

BertForMaskedLMImpl::BertForMaskedLMImpl(const BertConfig& config) : Module("BertForMaskedLM") {
  bert = register_module("bert", BertModel(config, /*add_pooling_layer=*/false));
  predictions = BertLMPredictionHead(config, bert->embeddings->word_embeddings->weight);
  auto cls = std::make_shared<nn::Module>("BertOnlyMLMHead");
  cls->register_module("predictions", predictions);
  register_module("cls", cls);
}

Tensor BertForMaskedLMImpl::forward(const Tensor& input_ids, const Tensor& attention_mask,
                                    const Tensor& token_type_ids, const Tensor& masked_positions) {
  Tensor h = bert(input_ids, attention_mask, token_type_ids).last_hidden_state;
  if (masked_positions.defined()) {
    EMBER_CHECK(masked_positions.dim() == 1, "BertForMaskedLM: expected masked_positions [M], got ",
                masked_positions.sizes());
    h = h.flatten(0, 1).index_select(0, masked_positions);
  }
  return predictions(h);
}

Tensor sentence_embedding(const Tensor& last_hidden_state, const Tensor& attention_mask) {
  EMBER_CHECK(last_hidden_state.dim() == 3 && attention_mask.dim() == 2 &&
                  last_hidden_state.size(0) == attention_mask.size(0) &&
                  last_hidden_state.size(1) == attention_mask.size(1),
              "sentence_embedding: expected last_hidden_state [B, L, H] and attention_mask [B, L], got ",
              last_hidden_state.sizes(), " and ", attention_mask.sizes());
  Tensor mask = (attention_mask != 0).to(last_hidden_state.dtype()).unsqueeze(-1);  // [B, L, 1]
  Tensor mean = (last_hidden_state * mask).sum({1}) / mask.sum({1}).clamp(1e-9);
  return mean / mean.norm(2, {1}, /*keepdim=*/true).clamp(1e-12);
}

}  // namespace ember::models
