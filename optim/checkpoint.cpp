#include "ember/optim/checkpoint.h"

#include "ember/core/random.h"
#include "ember/core/serialize.h"
#include "ember/cuda/device.h"

namespace ember::optim {

void Checkpoint::put(const std::string& part, const StateDict& state) {
  EMBER_CHECK(part.find('.') == std::string::npos, "Checkpoint: part name \"", part, "\" must not contain '.'");
  parts_[part] = state;
}

const StateDict& Checkpoint::get(const std::string& part) const {
  auto it = parts_.find(part);
  if (it == parts_.end()) {
    std::string names;
    for (const auto& [name, _] : parts_) {
      if (!names.empty()) names += ", ";
      names += name;
    }
    throw Error("Checkpoint: no part \"" + part + "\" (the checkpoint has: " + names + ")");
  }
  return it->second;
}

void Checkpoint::save(const std::string& path) const {
  StateDict all;
  for (const auto& [part, state] : parts_) {
    for (const auto& [key, t] : state.tensors) all.tensors.insert(part + "." + key, t);
    for (const auto& [key, v] : state.metadata) all.metadata[part + "." + key] = v;
    // An empty part still appears, so that has() answers the same after loading.
    all.metadata.emplace("ember.part." + part, "1");
  }
  ember::save(all, path);
}

Checkpoint Checkpoint::load(const std::string& path) {
  StateDict all = ember::load(path);
  Checkpoint c;
  auto split = [&](const std::string& key) {
    const size_t dot = key.find('.');
    EMBER_CHECK(dot != std::string::npos, "Checkpoint: ", path, ": key \"", key, "\" names no part");
    return std::make_pair(key.substr(0, dot), key.substr(dot + 1));
  };
  for (const auto& [key, v] : all.metadata) {
    if (key.rfind("ember.part.", 0) == 0) {
      c.parts_[key.substr(11)];
      continue;
    }
    auto [part, rest] = split(key);
    c.parts_[part].metadata[rest] = v;
  }
  for (const auto& [key, t] : all.tensors) {
    auto [part, rest] = split(key);
    c.parts_[part].tensors.insert(rest, t);
  }
  return c;
}

namespace {

StateDict rng_state() {
  StateDict s;
  s.tensors.insert("cpu", get_rng_state(&default_generator(kCPU)));
  if (cuda::is_available()) s.tensors.insert("cuda", get_rng_state(&default_generator(kCUDA)));
  return s;
}

void set_rng(const StateDict& s) {
  set_rng_state(s.tensors.at("cpu"), &default_generator(kCPU));
  if (const Tensor* t = s.tensors.find("cuda"); t && cuda::is_available())
    set_rng_state(*t, &default_generator(kCUDA));
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer,
                     const LRScheduler* scheduler, int64_t step, const amp::GradScaler* scaler,
                     const nn::Module* averaged_model) {
  Checkpoint c;
  c.put("model", StateDict{model.state_dict(), {}});
  if (averaged_model) c.put("averaged_model", StateDict{averaged_model->state_dict(), {}});
  if (optimizer) c.put("optimizer", optimizer->state_dict());
  if (scheduler) c.put("scheduler", scheduler->state_dict());
  // A disabled scaler has no state (f32 and bf16 runs): nothing to restore.
  if (scaler && scaler->is_enabled()) c.put("scaler", scaler->state_dict());
  c.put("rng", rng_state());
  c.put("train", StateDict{{}, {{"step", std::to_string(step)}}});
  c.save(path);
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer* optimizer,
                        LRScheduler* scheduler, amp::GradScaler* scaler, nn::Module* averaged_model) {
  Checkpoint c = Checkpoint::load(path);
  model.load_state_dict(c.get("model").tensors, /*strict=*/true);
  if (averaged_model && c.has("averaged_model"))
    averaged_model->load_state_dict(c.get("averaged_model").tensors, /*strict=*/true);
  if (optimizer) optimizer->load_state_dict(c.get("optimizer"));
  if (scheduler) scheduler->load_state_dict(c.get("scheduler"));
  if (scaler && scaler->is_enabled()) scaler->load_state_dict(c.get("scaler"));
  set_rng(c.get("rng"));
  const auto& meta = c.get("train").metadata;
  auto it = meta.find("step");
  EMBER_CHECK(it != meta.end(), "load_checkpoint: ", path, ": no step in the \"train\" part");
  return std::stoll(it->second);
}

}  // namespace ember::optim
