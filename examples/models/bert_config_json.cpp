// BertConfig::from_file through nlohmann-json (built when CMake finds it; see
// bert_config_no_json.cpp).
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include <ember/core/atomic_file.h>

#include "ember/examples/models/bert_config.h"

namespace ember::models {

namespace {

using nlohmann::json;

// Reads config[key] into *out when present; a missing required key or a value of another JSON
// type throws naming the file and the key.
class Reader {
 public:
  Reader(const json& config, const std::string& path) : config_(config), path_(path) {}

  void integer(const char* key, int64_t& out, bool required = false) {
    if (const json* v = find(key, required))
      out = check(key, *v, v->is_number_integer(), "an integer")->get<int64_t>();
  }
  void number(const char* key, double& out) {
    if (const json* v = find(key, false)) out = check(key, *v, v->is_number(), "a number")->get<double>();
  }
  // null means "not set", as in transformers (classifier_dropout).
  void optional_number(const char* key, std::optional<double>& out) {
    if (const json* v = find(key, false); v && !v->is_null())
      out = check(key, *v, v->is_number(), "a number or null")->get<double>();
  }
  void string(const char* key, std::string& out) {
    if (const json* v = find(key, false))
      out = check(key, *v, v->is_string(), "a string")->get<std::string>();
  }

 private:
  const json* find(const char* key, bool required) const {
    auto it = config_.find(key);
    EMBER_CHECK(it != config_.end() || !required, "BertConfig: ", path_, ": missing key \"", key, "\"");
    return it == config_.end() ? nullptr : &*it;
  }
  const json* check(const char* key, const json& v, bool ok, const char* expected) const {
    EMBER_CHECK(ok, "BertConfig: ", path_, ": \"", key, "\" must be ", expected, ", got ", v.dump());
    return &v;
  }
  const json& config_;
  const std::string& path_;
};

}  // namespace

BertConfig BertConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  EMBER_CHECK(in, "BertConfig: cannot open ", path);
  json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  EMBER_CHECK(!config.is_discarded(), "BertConfig: ", path, " is not valid JSON");
  EMBER_CHECK(config.is_object(), "BertConfig: ", path, " must hold a JSON object, got ", config.type_name());

  BertConfig c;
  Reader r(config, path);
  r.integer("vocab_size", c.vocab_size(), true);
  r.integer("hidden_size", c.hidden_size(), true);
  r.integer("num_hidden_layers", c.num_hidden_layers(), true);
  r.integer("num_attention_heads", c.num_attention_heads(), true);
  r.integer("intermediate_size", c.intermediate_size(), true);
  r.string("hidden_act", c.hidden_act());
  r.number("hidden_dropout_prob", c.hidden_dropout_prob());
  r.number("attention_probs_dropout_prob", c.attention_probs_dropout_prob());
  r.integer("max_position_embeddings", c.max_position_embeddings());
  r.integer("type_vocab_size", c.type_vocab_size());
  r.number("layer_norm_eps", c.layer_norm_eps());
  r.integer("pad_token_id", c.pad_token_id());
  r.number("initializer_range", c.initializer_range());
  r.optional_number("classifier_dropout", c.classifier_dropout());
  std::string position_embedding_type = "absolute";
  r.string("position_embedding_type", position_embedding_type);
  EMBER_CHECK(position_embedding_type == "absolute", "BertConfig: ", path, ": \"position_embedding_type\" \"",
              position_embedding_type, "\" is not supported (only \"absolute\")");
  try {
    c.validate();
  } catch (const Error& e) {
    // "BertConfig: hidden_act ..." becomes "BertConfig: <path>: hidden_act ...".
    std::string what = e.what();
    throw Error("BertConfig: " + path + ": " + what.substr(what.find(": ") + 2));
  }
  return c;
}

void BertConfig::to_json_file(const std::string& path, const std::string& architecture,
                              const std::vector<std::string>& labels) const {
  validate();
  json config = {{"architectures", {architecture}},
                 {"model_type", "bert"},
                 {"vocab_size", vocab_size()},
                 {"hidden_size", hidden_size()},
                 {"num_hidden_layers", num_hidden_layers()},
                 {"num_attention_heads", num_attention_heads()},
                 {"intermediate_size", intermediate_size()},
                 {"hidden_act", hidden_act()},
                 {"hidden_dropout_prob", hidden_dropout_prob()},
                 {"attention_probs_dropout_prob", attention_probs_dropout_prob()},
                 {"max_position_embeddings", max_position_embeddings()},
                 {"type_vocab_size", type_vocab_size()},
                 {"layer_norm_eps", layer_norm_eps()},
                 {"pad_token_id", pad_token_id()},
                 {"initializer_range", initializer_range()},
                 {"position_embedding_type", "absolute"},
                 {"classifier_dropout", nullptr}};
  if (classifier_dropout()) config["classifier_dropout"] = *classifier_dropout();
  for (size_t i = 0; i < labels.size(); ++i) {
    config["id2label"][std::to_string(i)] = labels[i];
    config["label2id"][labels[i]] = i;
  }
  write_file_atomically(path, config.dump(2) + "\n", "BertConfig::to_json_file");
}

}  // namespace ember::models
