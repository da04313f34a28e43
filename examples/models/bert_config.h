#pragma once

// BertConfig: the architecture of a Hugging Face BERT, read from its config.json with the same
// keys (transformers' BertConfig). The sizes that define the architecture (vocab_size,
// hidden_size, num_hidden_layers, num_attention_heads, intermediate_size) are required; the
// others default to transformers' values.
//
//   auto config = models::BertConfig::from_file("all-MiniLM-L6-v2/config.json");
//   models::BertModel bert(config);
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::models {

// hidden_act: "gelu" (erf), "gelu_new" and "gelu_pytorch_tanh" (tanh approximation), "relu".
enum class BertActivation { Gelu, GeluTanh, Relu };
// Throws naming the value for any other name.
BertActivation parse_bert_activation(const std::string& hidden_act);

struct BertConfig {
  EMBER_ARG(int64_t, vocab_size) = 30522;
  EMBER_ARG(int64_t, hidden_size) = 768;
  EMBER_ARG(int64_t, num_hidden_layers) = 12;
  EMBER_ARG(int64_t, num_attention_heads) = 12;
  EMBER_ARG(int64_t, intermediate_size) = 3072;
  EMBER_ARG(std::string, hidden_act) = "gelu";
  EMBER_ARG(double, hidden_dropout_prob) = 0.1;
  EMBER_ARG(double, attention_probs_dropout_prob) = 0.1;
  EMBER_ARG(int64_t, max_position_embeddings) = 512;
  EMBER_ARG(int64_t, type_vocab_size) = 2;
  EMBER_ARG(double, layer_norm_eps) = 1e-12;
  EMBER_ARG(int64_t, pad_token_id) = 0;
  EMBER_ARG(double, initializer_range) = 0.02;
  // The classifier's dropout in BertForSequenceClassification; none: hidden_dropout_prob.
  EMBER_ARG(std::optional<double>, classifier_dropout) = std::nullopt;

 public:
  // Throws "BertConfig: <key> ..." for the first value that cannot make a model (a size that is
  // not positive, heads that do not divide hidden_size, a probability outside [0, 1), ...).
  void validate() const;
  // Reads and validates a config.json; errors name the file and the key. Keys it does not use
  // (architectures, model_type, ...) are ignored, as transformers keeps them aside; a
  // position_embedding_type other than "absolute" is refused.
  static BertConfig from_file(const std::string& path);
  // Writes config.json as transformers' to_json_file does (model_type "bert", and `architecture`,
  // e.g. "BertForMaskedLM", in "architectures"), atomically. `labels`, a classifier's label
  // names, go to id2label and label2id (transformers reads num_labels from them).
  void to_json_file(const std::string& path, const std::string& architecture,
                    const std::vector<std::string>& labels = {}) const;
};

}  // namespace ember::models
