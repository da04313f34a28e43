#pragma once

// The fuzz targets: each reader of untrusted files, fed one input's bytes. Any input must load or
// throw ember::Error; a crash, a sanitizer report, a hang or another exception is a bug.
// fuzz_main.cpp runs one under libFuzzer (scripts/fuzz.sh TARGET); tests/fuzz/test_fuzz_seeds.cpp
// replays each target's seeds, tools/fuzz/corpus/<name>/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::fuzz {

struct Target {
  const char* name;  // the fuzzer <name>_fuzz and its seeds
  void (*read)(const uint8_t* data, size_t size);
};

const std::vector<Target>& targets();
// The target called `name`; an ember::Error naming the targets there are otherwise.
const Target& target(const std::string& name);

}  // namespace ember::fuzz
