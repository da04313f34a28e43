// examples/models/bert_model.h, bert_config.h and bert_pretrained.h against Hugging Face
// transformers: parameter names and counts, config.json parsing, loading (missing, unexpected,
// tied keys) and the numbers of tools/golden/numpy_bert_reference.py (transformers' BERT in
// float64 numpy) on tests/models/fixtures. The all-MiniLM-L6-v2 tests run when its files are
// at $EMBER_MINILM_DIR or ${EMBER_DATA:-~/.cache/ember}/all-minilm-l6-v2 (scripts/fetch_minilm.sh),
// and skip otherwise.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ember/examples/models/bert_config.h"
#include "ember/examples/models/bert_model.h"
#include "ember/examples/models/bert_pretrained.h"
#include "test_util.h"

namespace ember::testing {
namespace {

namespace models = ember::models;
namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(EMBER_MODELS_FIXTURES) + "/" + name; }

// all-MiniLM-L6-v2's directory, or "" when it is not here.
std::string minilm_dir() {
  std::string dir;
  if (const char* env = std::getenv("EMBER_MINILM_DIR")) {
    dir = env;
  } else {
    const char* data = std::getenv("EMBER_DATA");
    const char* home = std::getenv("HOME");
    dir = data ? std::string(data) : std::string(home ? home : "") + "/.cache/ember";
    dir += "/all-minilm-l6-v2";  // where scripts/fetch_minilm.sh puts it
  }
  return fs::exists(dir + "/model.safetensors") ? dir : "";
}

models::BertConfig minilm_config() {
  return models::BertConfig()
      .vocab_size(30522)
      .hidden_size(384)
      .num_hidden_layers(6)
      .num_attention_heads(12)
      .intermediate_size(1536);
}

// tools/golden/numpy_bert_reference.py's TINY.
models::BertConfig tiny_config() {
  return models::BertConfig()
      .vocab_size(40)
      .hidden_size(32)
      .num_hidden_layers(2)
      .num_attention_heads(4)
      .intermediate_size(48)
      .max_position_embeddings(16);
}

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// The entries of `all` whose keys start with `prefix`, less the prefix; with an empty prefix,
// those that start with neither "input." nor "expected." (the weights).
OrderedDict<Tensor> part(const OrderedDict<Tensor>& all, const std::string& prefix) {
  OrderedDict<Tensor> out;
  for (const auto& [key, t] : all) {
    if (prefix.empty() ? !key.starts_with("input.") && !key.starts_with("expected.")
                       : key.starts_with(prefix))
      out.insert(key.substr(prefix.size()), t);
  }
  return out;
}

std::vector<std::string> keys_with_prefix(const OrderedDict<Tensor>& d, const std::string& prefix) {
  std::vector<std::string> keys;
  for (const auto& [key, t] : d)
    if (key.starts_with(prefix)) keys.push_back(key);
  return keys;
}

// Writes `text` to dir/name and returns the path.
std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

// from_file, or a skip when ember_models was built without nlohmann-json.
#define READ_CONFIG_OR_SKIP(config, path)                                               \
  models::BertConfig config;                                                            \
  try {                                                                                 \
    config = models::BertConfig::from_file(path);                                       \
  } catch (const Error& e) {                                                            \
    if (std::string(e.what()).find("built without nlohmann-json") != std::string::npos) \
      GTEST_SKIP() << e.what();                                                         \
    throw;                                                                              \
  }

TEST(ModelsBert, MiniLMHasTransformersParameters) {
  manual_seed(0);
  models::BertModel bert(minilm_config());
  // sum(t.numel()) over all-MiniLM-L6-v2's model.safetensors less embeddings.position_ids: 103
  // tensors.
  EXPECT_EQ(count_parameters(*bert), 22713216);
  OrderedDict<Tensor> sd = bert->state_dict();
  EXPECT_EQ(sd.size(), 103u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected{
      {"embeddings.word_embeddings.weight", {30522, 384}},
      {"embeddings.position_embeddings.weight", {512, 384}},
      {"embeddings.token_type_embeddings.weight", {2, 384}},
      {"embeddings.LayerNorm.weight", {384}},
      {"embeddings.LayerNorm.bias", {384}},
      {"encoder.layer.0.attention.self.query.weight", {384, 384}},
      {"encoder.layer.0.attention.self.query.bias", {384}},
      {"encoder.layer.0.attention.self.key.weight", {384, 384}},
      {"encoder.layer.0.attention.self.key.bias", {384}},
      {"encoder.layer.0.attention.self.value.weight", {384, 384}},
      {"encoder.layer.0.attention.self.value.bias", {384}},
      {"encoder.layer.0.attention.output.dense.weight", {384, 384}},
      {"encoder.layer.0.attention.output.dense.bias", {384}},
      {"encoder.layer.0.attention.output.LayerNorm.weight", {384}},
      {"encoder.layer.0.attention.output.LayerNorm.bias", {384}},
      {"encoder.layer.0.intermediate.dense.weight", {1536, 384}},
      {"encoder.layer.0.intermediate.dense.bias", {1536}},
      {"encoder.layer.0.output.dense.weight", {384, 1536}},
      {"encoder.layer.0.output.dense.bias", {384}},
      {"encoder.layer.0.output.LayerNorm.weight", {384}},
      {"encoder.layer.0.output.LayerNorm.bias", {384}},
      {"encoder.layer.1.attention.self.query.weight", {384, 384}}};
  // transformers' BertModel.state_dict() order.
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(sd.keys()[i], expected[i].first);
    EXPECT_EQ(sd[expected[i].first].sizes().vec(), expected[i].second) << expected[i].first;
  }
  EXPECT_EQ(sd.keys()[101], "pooler.dense.weight");
  EXPECT_EQ(sd.keys()[102], "pooler.dense.bias");
}

TEST(ModelsBert, TaskModelsHaveTransformersNames) {
  models::BertModel bare(tiny_config());
  const int64_t bare_count = count_parameters(*bare), H = 32, V = 40;

  models::BertForSequenceClassification cls(tiny_config(), 3);
  auto sd = cls->state_dict();
  EXPECT_EQ(sd.keys().front(), "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(sd.keys()[sd.size() - 4], "bert.pooler.dense.weight");
  EXPECT_EQ(sd.keys()[sd.size() - 2], "classifier.weight");
  EXPECT_TRUE(sd["classifier.weight"].sizes().equals({3, H}));
  EXPECT_EQ(count_parameters(*cls), bare_count + 3 * H + 3);

  // BertForMaskedLM: no pooler; transformers' head, whose decoder is the word embeddings and
  // cls.predictions.bias. state_dict lists the tied tensors under both names, parameters once.
  models::BertForMaskedLM mlm(tiny_config());
  sd = mlm->state_dict();
  EXPECT_TRUE(keys_with_prefix(sd, "bert.pooler").empty());
  EXPECT_EQ(keys_with_prefix(sd, "cls."),
            (std::vector<std::string>{"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                                      "cls.predictions.transform.dense.bias",
                                      "cls.predictions.transform.LayerNorm.weight",
                                      "cls.predictions.transform.LayerNorm.bias",
                                      "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}));
  EXPECT_TRUE(mlm->predictions->decoder_weight.is_same(mlm->bert->embeddings->word_embeddings->weight));
  EXPECT_EQ(sd["cls.predictions.decoder.weight"].data_ptr(),
            sd["bert.embeddings.word_embeddings.weight"].data_ptr());
  EXPECT_EQ(sd["cls.predictions.decoder.bias"].data_ptr(), sd["cls.predictions.bias"].data_ptr());
  EXPECT_FALSE(mlm->named_parameters().contains("cls.predictions.decoder.weight"));
  EXPECT_EQ(count_parameters(*mlm), bare_count - (H * H + H) + (H * H + H) + 2 * H + V);
}

TEST(ModelsBert, InitializedAsTransformers) {
  manual_seed(3);
  auto config = tiny_config()
                    .vocab_size(2000)
                    .hidden_size(64)
                    .intermediate_size(256)
                    .initializer_range(0.05)
                    .pad_token_id(7);
  models::BertForMaskedLM mlm(config);
  models::BertForSequenceClassification cls(config, 2);
  for (const nn::Module* m :
       {static_cast<nn::Module*>(mlm.ptr().get()), static_cast<nn::Module*>(cls.ptr().get())}) {
    for (const auto& [name, p] : m->named_parameters()) {
      SCOPED_TRACE(name);
      if (name.find("LayerNorm") != std::string::npos) {
        EXPECT_TRUE(p.eq(name.ends_with("weight") ? 1.0 : 0.0).all().item<bool>());
      } else if (name.ends_with("bias")) {
        EXPECT_TRUE(p.eq(0.0).all().item<bool>());
      } else if (p.numel() >= 4096) {
        Tensor w = name.find("word_embeddings") != std::string::npos
                       ? cat({p.narrow(0, 0, 7), p.narrow(0, 8, 1992)})
                       : p;
        EXPECT_NEAR(w.std().item<double>(), 0.05, 0.05 * 0.05);
        EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.005);
      }
    }
  }
  // The padding row is zero (and an Embedding padding_idx: it gets no gradient).
  EXPECT_TRUE(mlm->bert->embeddings->word_embeddings->weight[7].eq(0.0).all().item<bool>());
  EXPECT_EQ(mlm->bert->embeddings->word_embeddings->options.padding_idx(), 7);
}

// all-MiniLM-L6-v2's config.json.
const char* kMiniLMConfig = R"({
  "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
  "architectures": ["BertModel"],
  "attention_probs_dropout_prob": 0.1,
  "gradient_checkpointing": false,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 384,
  "initializer_range": 0.02,
  "intermediate_size": 1536,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 12,
  "num_hidden_layers": 6,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "transformers_version": "4.8.2",
  "type_vocab_size": 2,
  "use_cache": true,
  "vocab_size": 30522
})";

void expect_minilm(const models::BertConfig& c) {
  EXPECT_EQ(c.vocab_size(), 30522);
  EXPECT_EQ(c.hidden_size(), 384);
  EXPECT_EQ(c.num_hidden_layers(), 6);
  EXPECT_EQ(c.num_attention_heads(), 12);
  EXPECT_EQ(c.intermediate_size(), 1536);
  EXPECT_EQ(c.hidden_act(), "gelu");
  EXPECT_EQ(c.hidden_dropout_prob(), 0.1);
  EXPECT_EQ(c.attention_probs_dropout_prob(), 0.1);
  EXPECT_EQ(c.max_position_embeddings(), 512);
  EXPECT_EQ(c.type_vocab_size(), 2);
  EXPECT_EQ(c.layer_norm_eps(), 1e-12);
  EXPECT_EQ(c.pad_token_id(), 0);
  EXPECT_EQ(c.initializer_range(), 0.02);
  EXPECT_FALSE(c.classifier_dropout().has_value());
}

TEST(ModelsBert, ConfigFromFile) {
  TempDir dir;
  READ_CONFIG_OR_SKIP(c, write_file(dir, "config.json", kMiniLMConfig));
  expect_minilm(c);
  // Only the architecture's sizes are required; the rest default to transformers' values.
  auto minimal = models::BertConfig::from_file(
      write_file(dir, "minimal.json",
                 R"({"vocab_size": 99, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 16, "hidden_act": "gelu_new", "classifier_dropout": 0.25, "layer_norm_eps": 1e-5})"));
  EXPECT_EQ(minimal.vocab_size(), 99);
  EXPECT_EQ(minimal.hidden_act(), "gelu_new");
  EXPECT_EQ(minimal.classifier_dropout(), 0.25);
  EXPECT_EQ(minimal.layer_norm_eps(), 1e-5);
  EXPECT_EQ(minimal.max_position_embeddings(), 512);
  EXPECT_EQ(minimal.hidden_dropout_prob(), 0.1);
  auto null_dropout = models::BertConfig::from_file(
      write_file(dir, "null.json",
                 R"({"vocab_size": 9, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 16, "classifier_dropout": null})"));
  EXPECT_FALSE(null_dropout.classifier_dropout().has_value());

  const std::string real = minilm_dir();
  if (!real.empty()) expect_minilm(models::BertConfig::from_file(real + "/config.json"));
}

TEST(ModelsBert, ConfigErrorsNameTheFileAndKey) {
  TempDir dir;
  READ_CONFIG_OR_SKIP(ok, write_file(dir, "ok.json", kMiniLMConfig));
  // kMiniLMConfig with `key`'s value replaced by `value` (or the key removed, value empty).
  auto variant = [&](const std::string& key, const std::string& value) {
    std::string text = kMiniLMConfig;
    size_t at = text.find("\"" + key + "\"");
    size_t end = text.find_first_of(",\n}", text.find(':', at));
    text = value.empty() ? text.erase(at, end + 1 - at)
                         : text.replace(at, end - at, "\"" + key + "\": " + value);
    return write_file(dir, key + ".json", text);
  };
  std::string p = variant("hidden_act", "\"swish\"");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), "BertConfig", p.c_str(), "hidden_act", "swish");
  p = variant("hidden_size", "");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "missing key \"hidden_size\"");
  p = variant("num_hidden_layers", "\"6\"");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "\"num_hidden_layers\" must be an integer",
                     "\"6\"");
  p = variant("intermediate_size", "1536.5");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "\"intermediate_size\" must be an integer",
                     "1536.5");
  p = variant("layer_norm_eps", "\"1e-12\"");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "\"layer_norm_eps\" must be a number");
  p = variant("hidden_act", "1");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "\"hidden_act\" must be a string");
  p = variant("position_embedding_type", "\"relative_key\"");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "position_embedding_type", "relative_key");
  p = variant("num_attention_heads", "5");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(),
                     "hidden_size 384 is not a multiple of num_attention_heads 5");
  p = variant("hidden_dropout_prob", "1.5");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "hidden_dropout_prob must be in [0, 1)");
  p = variant("vocab_size", "0");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "vocab_size must be positive");
  p = write_file(dir, "broken.json", "{\"vocab_size\": 3");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "not valid JSON");
  p = write_file(dir, "array.json", "[1, 2]");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(p), p.c_str(), "must hold a JSON object", "array");
  EXPECT_EMBER_ERROR(models::BertConfig::from_file(dir.file("absent.json")), "cannot open", "absent.json");
  // A config built in code is checked when a model is built.
  EXPECT_EMBER_ERROR(models::BertModel(tiny_config().hidden_act("swish")), "hidden_act", "swish");
  EXPECT_EMBER_ERROR(models::BertModel(tiny_config().num_attention_heads(3)), "not a multiple");
}

struct TinyFixture {
  StateDict file = load(fixture("bert_tiny.safetensors"));
  OrderedDict<Tensor> weights = part(file.tensors, "");
  OrderedDict<Tensor> input = part(file.tensors, "input.");
  OrderedDict<Tensor> expected = part(file.tensors, "expected.");
};

TEST(ModelsBert, MatchesNumpyReference) {
  TinyFixture f;
  const Tensor &ids = f.input["input_ids"], &mask = f.input["attention_mask"],
               &types = f.input["token_type_ids"];
  for (ScalarType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype);
    const Tolerance tol = dtype == kFloat32 ? Tolerance{1e-5, 1e-5} : Tolerance{1e-10, 1e-10};
    auto expected = [&](const std::string& key) { return f.expected[key].to(dtype); };

    models::BertForSequenceClassification cls(tiny_config(), 3);
    cls->to(dtype);
    models::load_pretrained(*cls, f.weights);
    cls->eval();
    NoGradGuard no_grad;
    models::BertOutput out = cls->bert(ids, mask, types);
    EXPECT_CLOSE(out.last_hidden_state, expected("last_hidden_state"), tol);
    EXPECT_CLOSE(out.pooler_output, expected("pooler_output"), tol);
    EXPECT_CLOSE(cls(ids, mask, types), expected("sequence_classification_logits"), tol);
    EXPECT_CLOSE(models::sentence_embedding(out.last_hidden_state, mask), expected("sentence_embedding"),
                 tol);
    // Without a mask and token types: no padding, every token of type 0.
    EXPECT_CLOSE(cls->bert(ids).last_hidden_state, expected("last_hidden_state_unmasked"), tol);

    models::BertForMaskedLM mlm(tiny_config());
    mlm->to(dtype);
    models::load_pretrained(*mlm, f.weights);
    mlm->eval();
    const Tensor& positions = f.input["masked_positions"];
    EXPECT_CLOSE(mlm(ids, mask, types, positions), expected("masked_lm_logits"), tol);
    // The full logits at those positions are the same numbers.
    EXPECT_CLOSE(mlm(ids, mask, types).flatten(0, 1).index_select(0, positions), expected("masked_lm_logits"),
                 tol);

    models::BertModel tanh_gelu(tiny_config().hidden_act("gelu_new"));
    tanh_gelu->to(dtype);
    models::load_pretrained(*tanh_gelu, f.weights);
    tanh_gelu->eval();
    EXPECT_CLOSE(tanh_gelu(ids, mask, types).last_hidden_state, expected("last_hidden_state_gelu_new"), tol);
  }
  // The numpy reference itself: its config is tiny_config().
  TempDir dir;
  READ_CONFIG_OR_SKIP(c, write_file(dir, "config.json", f.file.metadata.at("config")));
  EXPECT_EQ(c.hidden_size(), 32);
  EXPECT_EQ(c.intermediate_size(), 48);
  EXPECT_EQ(c.max_position_embeddings(), 16);
  EXPECT_EQ(c.vocab_size(), 40);
}

TEST(ModelsBert, PaddingIsInvisible) {
  // Row 1 of the fixture has 4 tokens and 3 pads: its tokens' states equal those of the 4 tokens
  // alone, whatever ids the pads hold.
  TinyFixture f;
  models::BertModel bert(tiny_config());
  bert->to(kFloat64);
  models::load_pretrained(*bert, f.weights);
  bert->eval();
  NoGradGuard no_grad;
  Tensor ids = f.input["input_ids"][1], types = f.input["token_type_ids"][1],
         mask = f.input["attention_mask"][1];
  ASSERT_EQ(mask.sum().item<int64_t>(), 4);
  Tensor alone =
      bert(ids.narrow(0, 0, 4).unsqueeze(0), Tensor(), types.narrow(0, 0, 4).unsqueeze(0)).last_hidden_state;
  Tensor padded = bert(ids.unsqueeze(0), mask.unsqueeze(0), types.unsqueeze(0)).last_hidden_state;
  EXPECT_CLOSE(padded.narrow(1, 0, 4), alone, Tolerance{1e-12, 1e-12});
  Tensor other_pads = cat({ids.narrow(0, 0, 4), tensor({5, 9, 11}, kInt64)}).unsqueeze(0);
  Tensor bool_mask = mask.unsqueeze(0).to(kBool);
  EXPECT_CLOSE(bert(other_pads, bool_mask, types.unsqueeze(0)).last_hidden_state.narrow(1, 0, 4), alone,
               Tolerance{1e-12, 1e-12});
  // Without the mask the pads are attended to.
  EXPECT_FALSE(
      assert_close(bert(ids.unsqueeze(0), Tensor(), types.unsqueeze(0)).last_hidden_state.narrow(1, 0, 4),
                   alone, Tolerance{1e-6, 1e-6}));
}

TEST(ModelsBert, SentenceEmbeddingIsMeanPooledAndNormalized) {
  // [B=2, L=3, H=2], the second row's last token padding.
  Tensor h =
      tensor({{{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, {{1.0, 0.0}, {0.0, 3.0}, {100.0, 100.0}}}, kFloat64);
  Tensor mask = tensor({{1, 1, 1}, {1, 1, 0}}, kInt64);
  Tensor e = models::sentence_embedding(h, mask);
  const double a = 1 / std::sqrt(9.0 + 16.0), b = 1 / std::sqrt(0.25 + 2.25);
  EXPECT_CLOSE(e, tensor({{3.0 * a, 4.0 * a}, {0.5 * b, 1.5 * b}}, kFloat64), Tolerance{1e-15, 1e-15});
  EXPECT_EMBER_ERROR(models::sentence_embedding(h, tensor({1, 1}, kInt64)), "sentence_embedding", "[2]");
}

TEST(ModelsBert, LoadReportsMissingAndUnexpectedKeys) {
  TinyFixture f;
  const std::vector<std::string> head_keys{"classifier.weight",
                                           "classifier.bias",
                                           "cls.predictions.transform.dense.weight",
                                           "cls.predictions.transform.dense.bias",
                                           "cls.predictions.transform.LayerNorm.weight",
                                           "cls.predictions.transform.LayerNorm.bias",
                                           "cls.predictions.bias"};
  // A task checkpoint into the bare model: "bert." is dropped, the heads are unexpected.
  models::BertModel bert(tiny_config());
  nn::IncompatibleKeys keys = models::load_pretrained(*bert, f.weights);
  EXPECT_TRUE(keys.missing_keys.empty());
  std::vector<std::string> unexpected = keys.unexpected_keys;
  std::sort(unexpected.begin(), unexpected.end());
  std::vector<std::string> sorted_heads = head_keys;
  std::sort(sorted_heads.begin(), sorted_heads.end());
  EXPECT_EQ(unexpected, sorted_heads);
  EXPECT_CLOSE(bert->embeddings->word_embeddings->weight,
               f.weights["bert.embeddings.word_embeddings.weight"]);

  // Into the masked LM: the decoder (left out of the file, as transformers saves it) comes from
  // the word embeddings; the pooler and the classifier are unexpected.
  models::BertForMaskedLM mlm(tiny_config());
  keys = models::load_pretrained(*mlm, f.weights);
  EXPECT_TRUE(keys.missing_keys.empty()) << keys.missing_keys.size();
  unexpected = keys.unexpected_keys;
  std::sort(unexpected.begin(), unexpected.end());
  EXPECT_EQ(unexpected, (std::vector<std::string>{"bert.pooler.dense.bias", "bert.pooler.dense.weight",
                                                  "classifier.bias", "classifier.weight"}));
  EXPECT_CLOSE(mlm->predictions->bias, f.weights["cls.predictions.bias"]);

  // A bare encoder's checkpoint (MiniLM's layout: no "bert.", with position_ids) into a task
  // model: it loads into `bert`; the head is missing; position_ids is not reported.
  OrderedDict<Tensor> encoder;
  encoder.insert("embeddings.position_ids", arange(16).unsqueeze(0));
  for (const auto& [key, t] : f.weights)
    if (key.starts_with("bert.") && key != "bert.encoder.layer.1.output.dense.bias")
      encoder.insert(key.substr(5), t);
  TempDir dir;
  save(encoder, dir.file("model.safetensors"));
  models::BertForSequenceClassification cls(tiny_config(), 3);
  keys = models::load_pretrained(*cls, dir.path());
  EXPECT_EQ(keys.missing_keys, (std::vector<std::string>{"bert.encoder.layer.1.output.dense.bias",
                                                         "classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(keys.unexpected_keys.empty());
  EXPECT_CLOSE(cls->bert->pooler->dense->weight, f.weights["bert.pooler.dense.weight"]);

  // TensorFlow-era LayerNorm names load as weight and bias.
  OrderedDict<Tensor> legacy;
  for (const auto& [key, t] : encoder) {
    std::string k = key;
    if (k == "embeddings.LayerNorm.weight") k = "embeddings.LayerNorm.gamma";
    if (k == "embeddings.LayerNorm.bias") k = "embeddings.LayerNorm.beta";
    legacy.insert(k, t);
  }
  models::BertModel from_legacy(tiny_config());
  keys = models::load_pretrained(*from_legacy, legacy);
  EXPECT_EQ(keys.missing_keys, (std::vector<std::string>{"encoder.layer.1.output.dense.bias"}));
  EXPECT_TRUE(keys.unexpected_keys.empty());
  EXPECT_CLOSE(from_legacy->embeddings->LayerNorm->bias, f.weights["bert.embeddings.LayerNorm.bias"]);
}

TEST(ModelsBert, LoadErrors) {
  TinyFixture f;
  OrderedDict<Tensor> weights = f.weights;
  weights["bert.encoder.layer.0.intermediate.dense.weight"] = zeros({47, 32});
  TempDir dir;
  save(weights, dir.file("wrong.safetensors"));
  models::BertForSequenceClassification cls(tiny_config(), 3);
  Tensor before = cls->bert->embeddings->word_embeddings->weight.clone();
  EXPECT_EMBER_ERROR(models::load_pretrained(*cls, dir.file("wrong.safetensors")), "load_pretrained",
                     "wrong.safetensors", "bert.encoder.layer.0.intermediate.dense.weight", "[47, 32]",
                     "[48, 32]");
  // Nothing was copied.
  EXPECT_CLOSE(cls->bert->embeddings->word_embeddings->weight, before);
  // A checkpoint for another number of labels.
  models::BertForSequenceClassification five(tiny_config(), 5);
  EXPECT_EMBER_ERROR(models::load_pretrained(*five, f.weights), "classifier.weight", "[3, 32]", "[5, 32]");
  EXPECT_EMBER_ERROR(models::load_pretrained(*cls, dir.path()), "load_pretrained", "no such file",
                     "model.safetensors");
}

TEST(ModelsBert, SavePretrainedRoundTrips) {
  manual_seed(3);
  models::BertForMaskedLM mlm(tiny_config().hidden_act("gelu_new"));
  TempDir dir;
  try {
    models::save_pretrained(*mlm, mlm->bert->config, "BertForMaskedLM", dir.path());
  } catch (const Error& e) {
    if (std::string(e.what()).find("built without nlohmann-json") != std::string::npos)
      GTEST_SKIP() << e.what();
    throw;
  }
  // As transformers writes it: tied weights once, float32, the "format" metadata it requires.
  StateDict file = load(dir.file("model.safetensors"));
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_FALSE(file.tensors.contains("cls.predictions.decoder.weight"));
  EXPECT_FALSE(file.tensors.contains("cls.predictions.decoder.bias"));
  EXPECT_TRUE(file.tensors.contains("cls.predictions.bias"));
  EXPECT_EQ(file.tensors.size(), mlm->state_dict().size() - 2);
  const std::string json = read_text(dir.file("config.json"));
  for (const char* want : {"\"architectures\": [", "\"BertForMaskedLM\"", "\"model_type\": \"bert\"",
                           "\"hidden_act\": \"gelu_new\"", "\"classifier_dropout\": null"})
    EXPECT_NE(json.find(want), std::string::npos) << want << " in\n" << json;

  // Back into ember: the same config, every key, the same numbers.
  models::BertConfig config = models::BertConfig::from_file(dir.file("config.json"));
  EXPECT_EQ(config.hidden_act(), "gelu_new");
  EXPECT_EQ(config.max_position_embeddings(), 16);
  models::BertForMaskedLM back(config);
  nn::IncompatibleKeys keys = models::load_pretrained(*back, dir.path());
  EXPECT_TRUE(keys.missing_keys.empty() && keys.unexpected_keys.empty());
  Tensor ids = randint(0, 40, {2, 7});
  mlm->eval();
  back->eval();
  EXPECT_CLOSE(back(ids), mlm(ids));

  // A classifier's label names become id2label / label2id.
  models::BertForSequenceClassification cls(tiny_config(), 2);
  models::save_pretrained(*cls, tiny_config(), "BertForSequenceClassification", dir.file("cls"),
                          {"bad", "good"});
  const std::string cls_json = read_text(dir.file("cls/config.json"));
  EXPECT_NE(cls_json.find("\"id2label\": {\n    \"0\": \"bad\",\n    \"1\": \"good\""), std::string::npos)
      << cls_json;
  EXPECT_NE(cls_json.find("\"good\": 1"), std::string::npos) << cls_json;
  EXPECT_EMBER_ERROR(models::save_pretrained(*cls, tiny_config().hidden_act("swish"), "X", dir.file("bad")),
                     "BertConfig: hidden_act \"swish\"");
}

TEST(ModelsBert, ForwardErrors) {
  models::BertModel bert(tiny_config());
  Tensor ids = zeros({2, 5}, kInt64);
  EXPECT_EMBER_ERROR(bert(zeros({5}, kInt64)), "BertModel", "input_ids [batch, length]", "[5]");
  EXPECT_EMBER_ERROR(bert(ids, ones({2, 4}, kInt64)), "BertModel", "attention_mask", "[2, 5]", "[2, 4]");
  EXPECT_EMBER_ERROR(bert(ids, Tensor(), ones({1, 5}, kInt64)), "BertModel", "token_type_ids", "[1, 5]");
  EXPECT_EMBER_ERROR(bert(zeros({1, 17}, kInt64)), "BertModel", "17 tokens", "max_position_embeddings 16");
  models::BertForMaskedLM mlm(tiny_config());
  EXPECT_EMBER_ERROR(mlm(ids, Tensor(), Tensor(), zeros({2, 2}, kInt64)), "BertForMaskedLM",
                     "masked_positions", "[2, 2]");
  EXPECT_EMBER_ERROR(models::BertForSequenceClassification(tiny_config(), 0), "num_labels", "0");
}

TEST(ModelsBert, GradientCheckpointingGivesTheSameGradients) {
  // Training mode without dropout: checkpointed layers give the gradients of a plain run; the
  // tied decoder gets the gradient of both its uses.
  TinyFixture f;
  auto config = tiny_config().hidden_dropout_prob(0).attention_probs_dropout_prob(0);
  auto grads = [&](bool checkpoint) {
    models::BertForMaskedLM mlm(config);
    mlm->to(kFloat64);
    models::load_pretrained(*mlm, f.weights);
    mlm->bert->set_gradient_checkpointing(checkpoint);
    Tensor logits = mlm(f.input["input_ids"], f.input["attention_mask"], f.input["token_type_ids"],
                        f.input["masked_positions"]);
    cross_entropy(logits, tensor({3, 1, 4, 1}, kInt64)).backward();
    OrderedDict<Tensor> g;
    for (const auto& [name, p] : mlm->named_parameters()) g.insert(name, p.grad());
    return g;
  };
  OrderedDict<Tensor> plain = grads(false), checkpointed = grads(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (const auto& [name, g] : plain) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(g.defined());
    EXPECT_CLOSE(checkpointed[name], g, Tolerance{1e-12, 1e-12});
  }
  EXPECT_GT(plain["bert.encoder.layer.0.attention.self.query.weight"].abs().sum().item<double>(), 0);

  // In the encoder alone (no tied decoder), the pad token's row gets no gradient, as
  // nn.Embedding(padding_idx=pad_token_id); the rows of other tokens do.
  models::BertModel bert(config);
  bert(f.input["input_ids"], f.input["attention_mask"]).last_hidden_state.sum().backward();
  Tensor g = bert->embeddings->word_embeddings->weight.grad();
  EXPECT_TRUE(g[0].eq(0.0).all().item<bool>());
  EXPECT_GT(g[f.input["input_ids"][0][0].item<int64_t>()].abs().sum().item<double>(), 0);
}

TEST(ModelsBert, MiniLMMatchesReference) {
  const std::string dir = minilm_dir();
  if (dir.empty()) GTEST_SKIP() << "all-MiniLM-L6-v2 not found (set EMBER_MINILM_DIR)";
  READ_CONFIG_OR_SKIP(config, dir + "/config.json");
  models::BertModel bert(config);
  // The file's keys (less the position_ids buffer) and shapes are the model's.
  StateDict file = load(dir + "/model.safetensors");
  OrderedDict<Tensor> sd = bert->state_dict();
  ASSERT_EQ(file.tensors.size(), sd.size() + 1);
  for (const auto& [key, t] : file.tensors) {
    if (key == "embeddings.position_ids") continue;
    ASSERT_TRUE(sd.contains(key)) << key;
    EXPECT_EQ(sd[key].sizes().vec(), t.sizes().vec()) << key;
  }
  nn::IncompatibleKeys keys = models::load_pretrained(*bert, dir);
  EXPECT_TRUE(keys.missing_keys.empty());
  EXPECT_TRUE(keys.unexpected_keys.empty());  // embeddings.position_ids is ignored, as transformers does
  bert->eval();
  StateDict ref = load(fixture("minilm_reference.safetensors"));
  const Tensor &ids = ref.tensors["input.input_ids"], &mask = ref.tensors["input.attention_mask"];
  NoGradGuard no_grad;
  models::BertOutput out = bert(ids, mask);
  // float32 against numpy's float64 over 6 layers (issue 21's tolerance).
  EXPECT_CLOSE(out.last_hidden_state, ref.tensors["expected.last_hidden_state"], Tolerance{1e-4, 1e-4});
  EXPECT_CLOSE(out.pooler_output, ref.tensors["expected.pooler_output"].to(kFloat32), Tolerance{1e-4, 1e-4});
  EXPECT_CLOSE(models::sentence_embedding(out.last_hidden_state, mask),
               ref.tensors["expected.sentence_embedding"].to(kFloat32), Tolerance{1e-5, 1e-5});

  // Into the task models, as transformers' from_pretrained reports it.
  models::BertForSequenceClassification cls(config, 3);
  keys = models::load_pretrained(*cls, dir);
  EXPECT_EQ(keys.missing_keys, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(keys.unexpected_keys.empty());
  models::BertForMaskedLM mlm(config);
  keys = models::load_pretrained(*mlm, dir);
  EXPECT_EQ(keys.unexpected_keys, (std::vector<std::string>{"pooler.dense.bias", "pooler.dense.weight"}));
  EXPECT_EQ(keys.missing_keys.front(), "cls.predictions.bias");
}

}  // namespace
}  // namespace ember::testing
