// libFuzzer target for the safetensors reader (core/serialize.h). Build and run: scripts/fuzz.sh.
//
// Any input must either load or throw ember::Error: a crash, a sanitizer report, a hang or
// another exception is a bug. What loads must survive a save and a reload unchanged.
#include <cstdint>
#include <cstring>

#include "ember/core/serialize.h"

namespace {

bool same(const ember::StateDict& a, const ember::StateDict& b) {
  if (a.metadata != b.metadata || a.tensors.keys() != b.tensors.keys()) return false;
  for (const auto& [name, t] : a.tensors) {
    const ember::Tensor& u = b.tensors[name];
    if (t.dtype() != u.dtype() || !t.sizes().equals(u.sizes())) return false;
    if (t.nbytes() > 0 && std::memcmp(t.data_ptr(), u.data_ptr(), t.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::StateDict loaded;
  try {
    loaded = ember::load_from_buffer(data, size);
  } catch (const ember::Error&) {
    return 0;
  }
  std::vector<uint8_t> saved = ember::save_to_buffer(loaded.tensors, loaded.metadata);
  if (!same(loaded, ember::load_from_buffer(saved.data(), saved.size()))) __builtin_trap();
  return 0;
}
