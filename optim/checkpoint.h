#pragma once

// Training checkpoints: the model, optimizer, LR scheduler, the RNG states and the step in one
// safetensors file (core/serialize.h: written atomically, a checksum per tensor), so that a
// run resumed from it continues bit for bit as if it had never stopped.
//   optim::save_checkpoint("ckpt.safetensors", *model, &opt, &sched, step);
//   int64_t step = optim::load_checkpoint("ckpt.safetensors", *model, &opt, &sched);

#include <cstdint>
#include <map>
#include <string>

#include "ember/core/state_dict.h"
#include "ember/nn/module.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/optimizer.h"

namespace ember::optim {

// Named parts, each a StateDict, stored under "<part>." prefixes in one file. Other components
// (a GradScaler, a data loader position) add their own parts.
class Checkpoint {
 public:
  void put(const std::string& part, const StateDict& state);
  bool has(const std::string& part) const { return parts_.count(part) > 0; }
  // The part's state; an error naming the part and the file's parts when it is absent.
  const StateDict& get(const std::string& part) const;

  void save(const std::string& path) const;
  static Checkpoint load(const std::string& path);

 private:
  std::map<std::string, StateDict> parts_;
};

// Parts "model", "optimizer", "scheduler", "scaler", "averaged_model" (each when given: the last
// is an EMA or SWA swa_utils::AveragedModel), "rng" (every default generator's state) and
// "train" (the step).
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer = nullptr,
                     const LRScheduler* scheduler = nullptr, int64_t step = 0,
                     const amp::GradScaler* scaler = nullptr, const nn::Module* averaged_model = nullptr);
// Restores what save_checkpoint wrote into existing objects (strict: every key must match) and
// returns the step. The RNG states are restored too. An averaged model absent from the file (one
// written without it) is left as it is.
int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer* optimizer = nullptr,
                        LRScheduler* scheduler = nullptr, amp::GradScaler* scaler = nullptr,
                        nn::Module* averaged_model = nullptr);

}  // namespace ember::optim
