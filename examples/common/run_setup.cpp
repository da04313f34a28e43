#include "ember/examples/common/run_setup.h"

#include <filesystem>

#include <ember/core/error.h>

namespace ember::examples {

Precision parse_precision(const std::string& program, const std::string& name, Device device) {
  Precision p;
  p.name = name.empty() ? (device.is_cuda() ? "bf16" : "f32") : name;
  EMBER_CHECK(p.name == "f32" || p.name == "bf16" || p.name == "f16", program,
              ": --precision must be f32, bf16 or f16, got ", p.name);
  p.autocast = p.name != "f32";
  p.dtype = p.name == "f16" ? kFloat16 : kBFloat16;
  p.grad_scaler = p.name == "f16";
  return p;
}

std::string prepare_outputs(const std::string& checkpoint, const std::string& metrics, bool main_rank) {
  namespace fs = std::filesystem;
  std::string out = metrics;
  if (out.empty() && !checkpoint.empty())
    out = (fs::path(checkpoint).parent_path() / "metrics.jsonl").string();
  if (main_rank) {
    for (const std::string& file : {checkpoint, out})
      if (fs::path(file).has_parent_path()) fs::create_directories(fs::path(file).parent_path());
  }
  return out;
}

}  // namespace ember::examples
