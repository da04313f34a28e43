// The kernel-range hooks of DispatchStub (what cuda::nvtx::set_emit_nvtx installs): with hooks set,
// every kernel call is bracketed by push(stub name) and pop, also when the kernel throws; unset,
// nothing is called; and the NVTX switch itself (a no-op without CUDA) restores what it found.
#include <ember/cuda/nvtx.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<std::string> g_events;
void record_push(const char* name) { g_events.push_back(std::string("push ") + name); }
void record_pop() { g_events.push_back("pop"); }
constexpr detail::KernelRangeHooks kRecording{&record_push, &record_pop};

class KernelRanges : public ::testing::Test {
 protected:
  void SetUp() override { g_events.clear(); }
  void TearDown() override { detail::g_kernel_range_hooks.store(nullptr); }
};

TEST_F(KernelRanges, EachKernelCallIsBracketedByItsStubName) {
  Tensor logits = tensor({{1.0, 2.0, 0.5}, {0.0, -1.0, 3.0}}, kFloat32);
  Tensor target = tensor({2, 0}, kInt64);
  Tensor off = cross_entropy(logits, target, {}, -100, "none");
  EXPECT_TRUE(g_events.empty());
  detail::g_kernel_range_hooks.store(&kRecording);
  Tensor on = cross_entropy(logits, target, {}, -100, "none");
  detail::g_kernel_range_hooks.store(nullptr);
  EXPECT_CLOSE(on, off);
  ASSERT_GE(g_events.size(), 2u);
  EXPECT_EQ(g_events.front(), "push cross_entropy_forward");
  EXPECT_EQ(g_events[1], "pop");
  // Balanced: as many pops as pushes, never more closed than opened.
  int depth = 0;
  for (const std::string& e : g_events) {
    depth += e == "pop" ? -1 : 1;
    EXPECT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
}

TEST_F(KernelRanges, AThrowingKernelStillClosesItsRange) {
  Tensor logits = zeros({2, 3}), target = tensor({0, 7}, kInt64);
  detail::g_kernel_range_hooks.store(&kRecording);
  EXPECT_EMBER_ERROR(cross_entropy(logits, target), "cross_entropy", "target 7",
                     "out of bounds for 3 classes");
  detail::g_kernel_range_hooks.store(nullptr);
  ASSERT_EQ(g_events.size(), 2u);
  EXPECT_EQ(g_events[0], "push cross_entropy_forward");
  EXPECT_EQ(g_events[1], "pop");
}

TEST_F(KernelRanges, EmitNvtxGuardRestoresTheSetting) {
  EXPECT_FALSE(cuda::nvtx::emit_nvtx_enabled());
  {
    cuda::nvtx::EmitNvtx on;
    EXPECT_TRUE(cuda::nvtx::emit_nvtx_enabled());
    {
      cuda::nvtx::EmitNvtx off(false);
      EXPECT_FALSE(cuda::nvtx::emit_nvtx_enabled());
    }
    EXPECT_TRUE(cuda::nvtx::emit_nvtx_enabled());
    cuda::NvtxRange range("test range");
    cuda::nvtx::mark("test mark");
    EXPECT_CLOSE(relu(tensor({-1.0, 2.0})), tensor({0.0, 2.0}));
  }
  EXPECT_FALSE(cuda::nvtx::emit_nvtx_enabled());
}

}  // namespace
}  // namespace ember::testing
