#pragma once

// BERT as Hugging Face transformers' modeling_bert builds it, with its module names, so a
// transformers state_dict maps 1:1: embeddings.{word,position,token_type}_embeddings,
// embeddings.LayerNorm, encoder.layer.N.attention.self.{query,key,value},
// encoder.layer.N.attention.output.{dense,LayerNorm}, encoder.layer.N.intermediate.dense,
// encoder.layer.N.output.{dense,LayerNorm}, pooler.dense; the task models hold it as `bert`.
// (transformers' non-persistent buffer embeddings.position_ids is not kept: positions are
// arange(L).) bert_pretrained.h loads transformers' safetensors files.
//
//   models::BertModel bert(models::BertConfig::from_file(dir + "/config.json"));
//   auto out = bert(input_ids, attention_mask);  // [B, L] int64 -> [B, L, H] and [B, H]
//   Tensor embeddings = models::sentence_embedding(out.last_hidden_state, attention_mask);
//
// Initialized as transformers' _init_weights: Linear and Embedding weights ~ N(0,
// initializer_range), biases 0, LayerNorm 1 and 0, the pad_token_id row of the word embeddings 0.
#include <cstdint>

#include <ember/ember.h>

#include "ember/examples/models/bert_config.h"

namespace ember::models {

class BertEmbeddingsImpl : public nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);
  // input_ids, token_type_ids [B, L] -> [B, L, H]; token_type_ids may be undefined (all 0).
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);

  nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
  nn::Dropout dropout{nullptr};
};
EMBER_MODULE(BertEmbeddings);

// Multi-head self-attention through scaled_dot_product_attention (its fused kernel), with
// dropout on the attention weights in training.
class BertSelfAttentionImpl : public nn::Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& config);
  // x [B, L, H]; key_mask undefined or bool [B, 1, 1, L] (true = attend) -> [B, L, H].
  Tensor forward(const Tensor& x, const Tensor& key_mask);

  nn::Linear query{nullptr}, key{nullptr}, value{nullptr};

 private:
  int64_t heads_;
  double dropout_p_;
};
EMBER_MODULE(BertSelfAttention);

// LayerNorm(dropout(dense(x)) + residual): the end of the attention and of the feed-forward
// block (transformers' BertSelfOutput and BertOutput).
class BertResidualOutputImpl : public nn::Module {
 public:
  BertResidualOutputImpl(const BertConfig& config, int64_t in_features);
  Tensor forward(const Tensor& x, const Tensor& residual);

  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
  nn::Dropout dropout{nullptr};
};
EMBER_MODULE(BertResidualOutput);

class BertAttentionImpl : public nn::Module {
 public:
  explicit BertAttentionImpl(const BertConfig& config);
  Tensor forward(const Tensor& x, const Tensor& key_mask);

  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
EMBER_MODULE(BertAttention);

// activation(dense(x)): [B, L, H] -> [B, L, intermediate_size].
class BertIntermediateImpl : public nn::Module {
 public:
  explicit BertIntermediateImpl(const BertConfig& config);
  Tensor forward(const Tensor& x);

  nn::Linear dense{nullptr};

 private:
  BertActivation activation_;
};
EMBER_MODULE(BertIntermediate);

class BertLayerImpl : public nn::Module {
 public:
  explicit BertLayerImpl(const BertConfig& config);
  Tensor forward(const Tensor& x, const Tensor& key_mask);

  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
EMBER_MODULE(BertLayer);

class BertEncoderImpl : public nn::Module {
 public:
  explicit BertEncoderImpl(const BertConfig& config);
  // With checkpoint, each layer runs under autograd::checkpoint (recomputed in backward).
  Tensor forward(const Tensor& x, const Tensor& key_mask, bool checkpoint);

  nn::ModuleList layer{nullptr};
};
EMBER_MODULE(BertEncoder);

// tanh(dense(h[:, 0])): the [CLS] token's state -> [B, H].
class BertPoolerImpl : public nn::Module {
 public:
  explicit BertPoolerImpl(const BertConfig& config);
  Tensor forward(const Tensor& hidden_states);

  nn::Linear dense{nullptr};
};
EMBER_MODULE(BertPooler);

struct BertOutput {
  Tensor last_hidden_state;  // [B, L, H]
  Tensor pooler_output;      // [B, H]; undefined without a pooler
};

class BertModelImpl : public nn::Module {
 public:
  // add_pooling_layer = false leaves out `pooler`, as transformers' BertForMaskedLM does.
  explicit BertModelImpl(const BertConfig& config, bool add_pooling_layer = true);
  // input_ids [B, L] (int64 or int32); attention_mask [B, L] (nonzero or true = a token, 0 =
  // padding; undefined: no padding): padded keys get no attention. token_type_ids [B, L]
  // (undefined: all 0).
  BertOutput forward(const Tensor& input_ids, const Tensor& attention_mask = {},
                     const Tensor& token_type_ids = {});
  // Recompute each encoder layer's activations in backward instead of keeping them (training
  // only; autograd::checkpoint).
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }

  BertConfig config;
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};

 private:
  bool gradient_checkpointing_ = false;
};
EMBER_MODULE(BertModel);

// The pooled output through dropout and a Linear(H, num_labels): names bert.*, classifier.*.
class BertForSequenceClassificationImpl : public nn::Module {
 public:
  BertForSequenceClassificationImpl(const BertConfig& config, int64_t num_labels);
  // -> logits [B, num_labels].
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask = {},
                 const Tensor& token_type_ids = {});

  BertModel bert{nullptr};
  nn::Dropout dropout{nullptr};
  nn::Linear classifier{nullptr};
};
EMBER_MODULE(BertForSequenceClassification);

// LayerNorm(activation(dense(h))): names transform.dense, transform.LayerNorm.
class BertPredictionHeadTransformImpl : public nn::Module {
 public:
  explicit BertPredictionHeadTransformImpl(const BertConfig& config);
  Tensor forward(const Tensor& hidden_states);

  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};

 private:
  BertActivation activation_;
};
EMBER_MODULE(BertPredictionHeadTransform);

// transformers' BertLMPredictionHead: transform, then the decoder, whose weight is the word
// embeddings' (tied) and whose bias is `bias`. As in transformers, state_dict lists the two
// again as decoder.weight and decoder.bias.
class BertLMPredictionHeadImpl : public nn::Module {
 public:
  BertLMPredictionHeadImpl(const BertConfig& config, const Tensor& word_embeddings);
  // [*, H] -> [*, vocab_size].
  Tensor forward(const Tensor& hidden_states);

  Tensor bias;  // [vocab_size]
  BertPredictionHeadTransform transform{nullptr};
  Tensor decoder_weight;  // the word embeddings' weight, [vocab_size, H]
};
EMBER_MODULE(BertLMPredictionHead);

// BERT without a pooler, and the masked-LM head: names bert.*, cls.predictions.*.
class BertForMaskedLMImpl : public nn::Module {
 public:
  explicit BertForMaskedLMImpl(const BertConfig& config);
  // -> logits [B, L, vocab_size]; with masked_positions (int64 [M], indices into the flattened
  // [B * L] tokens), only those tokens go through the head: logits [M, vocab_size], to compare
  // with the labels gathered the same way.
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask = {},
                 const Tensor& token_type_ids = {}, const Tensor& masked_positions = {});

  BertModel bert{nullptr};
  BertLMPredictionHead predictions{nullptr};  // registered as cls.predictions
};
EMBER_MODULE(BertForMaskedLM);

// sentence-transformers' embedding: the mean of last_hidden_state [B, L, H] over the tokens
// attention_mask [B, L] keeps, L2-normalized -> [B, H].
Tensor sentence_embedding(const Tensor& last_hidden_state, const Tensor& attention_mask);

}  // namespace ember::models
