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

// The CPU's adds already run in index order: the mode changes nothing there.
TEST(Deterministic, CpuIndexAddIsTheSameEitherWay) {
  manual_seed(4);
  const Tensor index = randint(0, 5, {200}), src = randn({200, 7});
  const Tensor free_order = index_add(zeros({5, 7}), 0, index, src);
  DeterministicMode mode(true);
  EXPECT_TRUE(index_add(zeros({5, 7}), 0, index, src).equal(free_order));
}

}  // namespace
}  // namespace ember::testing
