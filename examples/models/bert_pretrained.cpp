#include "ember/examples/models/bert_pretrained.h"

#include <filesystem>
#include <unordered_map>
#include <unordered_set>

namespace ember::models {

namespace {

// transformers' base_model_prefix for BERT.
constexpr std::string_view kPrefix = "bert.";

bool any_prefixed(const std::vector<std::string>& keys) {
  for (const std::string& k : keys)
    if (k.starts_with(kPrefix)) return true;
  return false;
}

// TensorFlow-era names: LayerNorm.gamma / .beta.
std::string modern_name(std::string key) {
  for (auto [old_suffix, new_suffix] : {std::pair{".gamma", ".weight"}, std::pair{".beta", ".bias"}})
    if (key.ends_with(old_suffix) && key.find("LayerNorm") != std::string::npos)
      return key.substr(0, key.size() - std::string_view(old_suffix).size()) + new_suffix;
  return key;
}

// `source` ("" or "<file>: ") goes into every error.
nn::IncompatibleKeys load_renamed(nn::Module& model, const OrderedDict<Tensor>& state,
                                  const std::string& source) {
  OrderedDict<Tensor> own = model.state_dict();
  const bool model_prefixed = any_prefixed(own.keys()), file_prefixed = any_prefixed(state.keys());
  OrderedDict<Tensor> renamed;
  std::unordered_map<std::string, std::string> file_keys;  // renamed key -> the file's
  for (const auto& [file_key, t] : state) {
    std::string key = modern_name(file_key);
    if (key == "embeddings.position_ids" || key.ends_with(".embeddings.position_ids")) continue;
    if (model_prefixed && !file_prefixed) key = std::string(kPrefix) + key;
    if (!model_prefixed && file_prefixed && key.starts_with(kPrefix)) key = key.substr(kPrefix.size());
    const Tensor* target = own.find(key);
    EMBER_CHECK(!renamed.contains(key), "load_pretrained: ", source,
                "two tensors of the state dict load into ", key);
    file_keys.emplace(key, file_key);
    renamed.insert(
        key, target && t.is_floating_point() && target->is_floating_point() ? t.to(target->dtype()) : t);
  }
  // A tensor reachable under several keys (tied weights) loads from whichever key the file has;
  // state_dict's entries are detached views, so the tie shows as the same data.
  std::unordered_map<const void*, std::string> present;
  for (const auto& [key, t] : own)
    if (renamed.contains(key)) present.emplace(t.data_ptr(), key);
  for (const auto& [key, t] : own) {
    auto it = present.find(t.data_ptr());
    if (!renamed.contains(key) && it != present.end()) renamed.insert(key, renamed[it->second]);
  }
  nn::IncompatibleKeys keys;
  try {
    keys = model.load_state_dict(renamed, /*strict=*/false);
  } catch (const Error& e) {
    throw Error("load_pretrained: " + source + e.what());
  }
  for (std::string& key : keys.unexpected_keys) key = file_keys.at(key);
  return keys;
}

}  // namespace

nn::IncompatibleKeys load_pretrained(nn::Module& model, const OrderedDict<Tensor>& state) {
  return load_renamed(model, state, "");
}

nn::IncompatibleKeys load_pretrained(nn::Module& model, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "model.safetensors").string() : path;
  EMBER_CHECK(fs::exists(file), "load_pretrained: no such file: ", file);
  return load_renamed(model, load(file).tensors, file + ": ");
}

void save_pretrained(nn::Module& model, const BertConfig& config, const std::string& architecture,
                     const std::string& dir, const std::vector<std::string>& labels) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  EMBER_CHECK(!ec, "save_pretrained: cannot create ", dir, ": ", ec.message());
  OrderedDict<Tensor> out;
  std::unordered_set<const void*> written;  // a tied tensor is saved under its first name only
  for (const auto& [key, t] : model.state_dict())
    if (written.insert(t.data_ptr()).second)
      out.insert(key, t.is_floating_point() ? t.to(Device(kCPU), kFloat32) : t.to(Device(kCPU)));
  config.to_json_file((fs::path(dir) / "config.json").string(), architecture, labels);
  save(out, (fs::path(dir) / "model.safetensors").string(), {{"format", "pt"}});
}

}  // namespace ember::models
