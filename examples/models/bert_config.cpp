#include "ember/examples/models/bert_config.h"

namespace ember::models {

BertActivation parse_bert_activation(const std::string& hidden_act) {
  if (hidden_act == "gelu") return BertActivation::Gelu;
  if (hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh") return BertActivation::GeluTanh;
  if (hidden_act == "relu") return BertActivation::Relu;
  throw Error("BertConfig: hidden_act \"" + hidden_act +
              "\" is not supported (gelu, gelu_new, gelu_pytorch_tanh or relu)");
}

void BertConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {{"vocab_size", vocab_size()},
                                                      {"hidden_size", hidden_size()},
                                                      {"num_hidden_layers", num_hidden_layers()},
                                                      {"num_attention_heads", num_attention_heads()},
                                                      {"intermediate_size", intermediate_size()},
                                                      {"max_position_embeddings", max_position_embeddings()},
                                                      {"type_vocab_size", type_vocab_size()}};
  for (const auto& [key, value] : positive)
    EMBER_CHECK(value > 0, "BertConfig: ", key, " must be positive, got ", value);
  EMBER_CHECK(hidden_size() % num_attention_heads() == 0, "BertConfig: hidden_size ", hidden_size(),
              " is not a multiple of num_attention_heads ", num_attention_heads());
  EMBER_CHECK(pad_token_id() >= 0 && pad_token_id() < vocab_size(), "BertConfig: pad_token_id ",
              pad_token_id(), " is not in [0, vocab_size ", vocab_size(), ")");
  const std::pair<const char*, double> probabilities[] = {
      {"hidden_dropout_prob", hidden_dropout_prob()},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob()},
      {"classifier_dropout", classifier_dropout().value_or(0)}};
  for (const auto& [key, p] : probabilities)
    EMBER_CHECK(p >= 0 && p < 1, "BertConfig: ", key, " must be in [0, 1), got ", p);
  EMBER_CHECK(layer_norm_eps() > 0, "BertConfig: layer_norm_eps must be positive, got ", layer_norm_eps());
  EMBER_CHECK(initializer_range() >= 0, "BertConfig: initializer_range must not be negative, got ",
              initializer_range());
  parse_bert_activation(hidden_act());
}

}  // namespace ember::models
