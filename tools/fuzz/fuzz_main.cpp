// libFuzzer's entry point for the targets in targets.cpp: tools/fuzz/CMakeLists.txt builds one
// fuzzer per target, <name>_fuzz, naming it in EMBER_FUZZ_TARGET. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "ember/core/error.h"
#include "ember/tools/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto read = ember::fuzz::target(EMBER_FUZZ_TARGET).read;
  try {
    read(data, size);
  } catch (const ember::Error&) {
    // rejected with a message: what a reader should do with a bad file
  }
  return 0;
}
