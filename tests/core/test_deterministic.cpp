// use_deterministic_algorithms: the mode and its warn_only flag, the alert that ops without a
// deterministic way call, and the CPU's ops, which are deterministic either way.
#include <ember/ember.h>

#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Deterministic, ModeAndWarnOnlyAreSetTogether) {
  EXPECT_FALSE(are_deterministic_algorithms_enabled());  // PyTorch's default
  EXPECT_FALSE(is_deterministic_algorithms_warn_only_enabled());
  {
    DeterministicMode mode(true, /*warn_only=*/true);
    EXPECT_TRUE(are_deterministic_algorithms_enabled());
    EXPECT_TRUE(is_deterministic_algorithms_warn_only_enabled());
    use_deterministic_algorithms(true);
    EXPECT_FALSE(is_deterministic_algorithms_warn_only_enabled());
  }
  EXPECT_FALSE(are_deterministic_algorithms_enabled());
}

TEST(Deterministic, AlertRaisesOrWarnsOncePerOp) {
  EXPECT_NO_THROW(detail::alert_not_deterministic("some_op", "its kernel"));  // mode off
  {
    DeterministicMode mode(true);
    EXPECT_EMBER_ERROR(detail::alert_not_deterministic("some_op", "its kernel"),
                       "some_op: its kernel has no deterministic implementation",
                       "use_deterministic_algorithms(true)", "warn_only");
  }
  DeterministicMode mode(true, /*warn_only=*/true);
  ::testing::internal::CaptureStderr();
  detail::alert_not_deterministic("warned_op", "its kernel");
  detail::alert_not_deterministic("warned_op", "its kernel");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("ember warning: warned_op: its kernel has no deterministic implementation"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("warned_op"), err.rfind("warned_op")) << "warned twice: " << err;
}

// The CPU's adds run in index order, one float add at a time, whatever the mode: the order the
// GPU's deterministic path copies, so that the two agree bit for bit.
TEST(Deterministic, CpuIndexAddSumsInIndexOrder) {
  manual_seed(4);
  const Tensor index = randint(0, 5, {200}), src = randn({200, 7});
  Tensor want = zeros({5, 7});
  float* w = want.data_ptr<float>();
  const int64_t* k = index.data_ptr<int64_t>();
  const float* v = src.data_ptr<float>();
  for (int64_t i = 0; i < 200; ++i)
    for (int64_t j = 0; j < 7; ++j) w[k[i] * 7 + j] += v[i * 7 + j];
  EXPECT_TRUE(index_add(zeros({5, 7}), 0, index, src).equal(want));
  DeterministicMode mode(true);
  EXPECT_TRUE(index_add(zeros({5, 7}), 0, index, src).equal(want));
}

}  // namespace
}  // namespace ember::testing
