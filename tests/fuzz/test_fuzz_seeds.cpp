// Every seed of every fuzz target (tools/fuzz/corpus/<target>/) through its reader: each loads or
// throws ember::Error, as the fuzzers require of any input. The crashes the fuzzers found are
// among the seeds, so this is their regression test in builds without clang's libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <ember/core/error.h>
#include <ember/tools/fuzz/targets.h>

namespace ember::testing {

namespace {

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const fuzz::Target& t : fuzz::targets()) names.push_back(t.name);
  return names;
}

class FuzzSeeds : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzSeeds, LoadOrThrowEmberError) {
  const fuzz::Target& target = fuzz::target(GetParam());
  const std::filesystem::path dir = std::filesystem::path(EMBER_FUZZ_CORPUS) / target.name;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    SCOPED_TRACE(entry.path().string());
    try {
      target.read(bytes.data(), bytes.size());
    } catch (const Error&) {
      // rejected with a message: what a reader should do with a bad file
    }
    ++seeds;
  }
  EXPECT_GT(seeds, 0) << dir << " holds no seeds";
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzSeeds, ::testing::ValuesIn(target_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace

}  // namespace ember::testing
