// tools/collectives_check (the program that checks every collective on N GPUs with NCCL) run
// under emberrun with Gloo at world sizes 2 and 4: it passes, and it notices a wrong result.
#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

const char* const kCollectives[] = {"all_reduce",     "broadcast",  "reduce",    "all_gather",
                                    "reduce_scatter", "all_to_all", "send/recv", "barrier"};

std::vector<std::string> check_argv(int world, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {EMBER_EMBERRUN_PATH,
                                   "--nproc-per-node",
                                   std::to_string(world),
                                   "--master-port",
                                   "0",
                                   EMBER_COLLECTIVES_CHECK_PATH,
                                   "--backend",
                                   "gloo"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

class CollectivesCheck : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesCheck, GlooPassesEveryCollective) {
  TempDir dir;
  Process p(check_argv(GetParam()), {}, dir.file("log"));
  ASSERT_EQ(p.wait(milliseconds(120'000)), 0) << p.output();
  std::string out = p.output();
  EXPECT_NE(out.find("gloo, world size " + std::to_string(GetParam())), std::string::npos) << out;
  for (const char* name : kCollectives)
    EXPECT_NE(out.find(std::string("PASS ") + name + "\n"), std::string::npos) << name << "\n" << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Gloo, CollectivesCheck, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// A wrong result on one rank fails that collective (and the job), the others still pass.
TEST(CollectivesCheckFailures, WrongResultFails) {
  TempDir dir;
  Process p(check_argv(2, {"--inject-fault", "reduce_scatter"}), {}, dir.file("log"));
  EXPECT_NE(p.wait(milliseconds(120'000)), 0) << p.output();
  std::string out = p.output();
  EXPECT_NE(out.find("FAIL reduce_scatter ("), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] FAIL reduce_scatter_tensor float32 SUM: element 0 is"), std::string::npos)
      << out;
  EXPECT_NE(out.find("PASS all_reduce\n"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS barrier\n"), std::string::npos) << out;
}

TEST(CollectivesCheckFailures, BadOptions) {
  TempDir dir;
  Process p({EMBER_COLLECTIVES_CHECK_PATH, "--backend", "mpi"}, {}, dir.file("log"));
  EXPECT_EQ(p.wait(milliseconds(10'000)), 2);
  EXPECT_NE(p.output().find("collectives_check: unknown backend mpi"), std::string::npos) << p.output();
  Process q({EMBER_COLLECTIVES_CHECK_PATH, "--numel"}, {}, dir.file("log2"));
  EXPECT_EQ(q.wait(milliseconds(10'000)), 2);
  EXPECT_NE(q.output().find("option --numel needs a value"), std::string::npos) << q.output();
}

}  // namespace
}  // namespace ember::testing::dist
