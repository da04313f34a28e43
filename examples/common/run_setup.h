#pragma once

// What every trainer decides the same way before its first step: the precision of its steps and
// where its outputs go.
#include <string>

#include <ember/core/device.h>
#include <ember/core/dtype.h>

namespace ember::examples {

// --precision f32 | bf16 | f16: autocast to bf16 or f16 (f16 also needs a GradScaler); empty picks
// bf16 on a GPU and f32 on the CPU.
struct Precision {
  std::string name;
  bool autocast = false;
  ScalarType dtype = kBFloat16;  // autocast's
  bool grad_scaler = false;
};
// Errors start with `program`.
Precision parse_precision(const std::string& program, const std::string& name, Device device);

// The metrics file: `metrics`, or metrics.jsonl beside the checkpoint when only that is given.
// The main process creates the folders of both.
std::string prepare_outputs(const std::string& checkpoint, const std::string& metrics, bool main_rank);

}  // namespace ember::examples
