// tools/common/arg_parser.h, the command-line parser of the tools and benchmarks.
#include <ember/tools/common/arg_parser.h>

#include "test_util.h"

namespace ember {
namespace {

using tools::ArgParser;

struct Parsed {
  std::string backend = "gloo";
  int steps = 50;
  int64_t numel = 16;
  double seconds = 2.5;
  bool profile = false;
  std::vector<std::string> dtypes = {"f32", "bf16"};
  std::vector<int64_t> sizes;
};

// Parses `args` (without the program name) into a Parsed; returns what parse() returned.
bool parse(Parsed& p, std::vector<const char*> args) {
  ArgParser parser("prog");
  parser.option("--backend", &p.backend, "nccl or gloo")
      .option("--steps", &p.steps, "steps")
      .option("--numel", &p.numel, "elements")
      .option("--seconds", &p.seconds, "duration")
      .option("--dtypes", &p.dtypes, "dtypes")
      .option("--size", &p.sizes, "sizes")
      .flag("--profile", &p.profile, "profile");
  args.insert(args.begin(), "prog");
  return parser.parse(static_cast<int>(args.size()), args.data());
}

TEST(ArgParser, DefaultsStayWithoutOptions) {
  Parsed p;
  EXPECT_TRUE(parse(p, {}));
  EXPECT_EQ(p.backend, "gloo");
  EXPECT_EQ(p.steps, 50);
  EXPECT_EQ(p.numel, 16);
  EXPECT_EQ(p.seconds, 2.5);
  EXPECT_FALSE(p.profile);
  EXPECT_EQ(p.dtypes, (std::vector<std::string>{"f32", "bf16"}));
}

TEST(ArgParser, SetsEveryKind) {
  Parsed p;
  EXPECT_TRUE(parse(p, {"--steps", "-3", "--backend", "nccl", "--profile", "--numel", "8589934592",
                        "--seconds", "0.25", "--dtypes", "bf16"}));
  EXPECT_EQ(p.backend, "nccl");
  EXPECT_EQ(p.steps, -3);
  EXPECT_EQ(p.numel, int64_t{1} << 33);
  EXPECT_EQ(p.seconds, 0.25);
  EXPECT_TRUE(p.profile);
  EXPECT_EQ(p.dtypes, std::vector<std::string>{"bf16"});
}

TEST(ArgParser, ListsSplitOnCommasAndAppendOnRepeats) {
  Parsed p;
  EXPECT_TRUE(parse(p, {"--dtypes", "f32,bf16,f32", "--size", "4,8", "--size", "100"}));
  EXPECT_EQ(p.dtypes, (std::vector<std::string>{"f32", "bf16", "f32"}));
  EXPECT_EQ(p.sizes, (std::vector<int64_t>{4, 8, 100}));
}

TEST(ArgParser, HelpPrintsUsageAndReturnsFalse) {
  Parsed p;
  ::testing::internal::CaptureStdout();
  EXPECT_FALSE(parse(p, {"--steps", "3", "--help"}));
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("usage: prog [--backend S] [--steps N] [--numel N] [--seconds X] [--dtypes A,B,..]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--steps N"), std::string::npos) << out;
  EXPECT_NE(out.find("steps (default 50)"), std::string::npos) << out;
  EXPECT_NE(out.find("dtypes (default f32,bf16)"), std::string::npos) << out;
  EXPECT_NE(out.find("[--profile]"), std::string::npos) << out;
}

TEST(ArgParser, Errors) {
  Parsed p;
  EXPECT_EMBER_ERROR(parse(p, {"--lr", "1"}), "prog: unknown option --lr");
  EXPECT_EMBER_ERROR(parse(p, {"steps", "1"}), "prog: unknown option steps");
  EXPECT_EMBER_ERROR(parse(p, {"--steps"}), "prog: option --steps needs a value");
  // std::atoi gave 0 and 3 for these.
  EXPECT_EMBER_ERROR(parse(p, {"--steps", "abc"}), "prog: option --steps needs an integer, got 'abc'");
  EXPECT_EMBER_ERROR(parse(p, {"--steps", "3x"}), "prog: option --steps needs an integer, got '3x'");
  EXPECT_EMBER_ERROR(parse(p, {"--steps", ""}), "prog: option --steps needs an integer, got ''");
  EXPECT_EMBER_ERROR(parse(p, {"--steps", "1.5"}), "needs an integer, got '1.5'");
  EXPECT_EMBER_ERROR(parse(p, {"--steps", "3000000000"}),
                     "--steps needs an integer in range, got '3000000000'");
  EXPECT_EMBER_ERROR(parse(p, {"--seconds", "fast"}), "prog: option --seconds needs a number, got 'fast'");
  EXPECT_EMBER_ERROR(parse(p, {"--size", "4,,8"}), "prog: option --size needs an integer, got ''");
}

TEST(ArgParser, ExitCodesPrintTheMessageAndUsage) {
  ArgParser parser("prog");
  int steps = 1;
  parser.option("--steps", &steps, "steps");
  const char* good[] = {"prog", "--steps", "7"};
  const char* bad[] = {"prog", "--x"};
  const char* help[] = {"prog", "--help"};
  EXPECT_EQ(parser.parse_or_exit_code(3, good), std::nullopt);
  EXPECT_EQ(steps, 7);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(parser.parse_or_exit_code(2, help), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "usage: prog [--steps N]\n  --steps N  steps (default 1)\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(parser.parse_or_exit_code(2, bad), 2);
  EXPECT_EQ(parser.fail("--steps must be positive"), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "prog: unknown option --x\nusage: prog [--steps N]\n  --steps N  steps (default 1)\n"
            "prog: --steps must be positive\nusage: prog [--steps N]\n  --steps N  steps (default 1)\n");
}

}  // namespace
}  // namespace ember
