// What a memory snapshot names as a block's maker (core/allocation_context.h): with memory history
// recorded, the innermost module call or kernel running on the thread; without it, nothing.
#include <ember/core/allocation_context.h>
#include <ember/core/dispatch.h>
#include <ember/cuda/caching_allocator.h>
#include <ember/nn/container.h>
#include <ember/nn/module_holder.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<std::string> seen;  // current_allocation_context() at each probe

using ProbeFn = void (*)();
constinit DispatchStub<ProbeFn> probe_stub("test_probe_kernel");
KernelRegistrar<ProbeFn> reg_probe(probe_stub, kCPU,
                                   [] { seen.push_back(detail::current_allocation_context()); });

// A module whose forward looks at the context itself, then calls the kernel.
struct ProbeImpl : nn::Module {
  ProbeImpl() : nn::Module("Probe") {}
  Tensor forward(const Tensor& x) {
    seen.push_back(detail::current_allocation_context());
    probe_stub(kCPU)();
    return x;
  }
};
EMBER_MODULE(Probe);

// Memory history on for one test.
struct Recording {
  Recording() { cuda::record_memory_history(true); }
  ~Recording() { cuda::record_memory_history(false); }
};

TEST(AllocationContext, InnermostModuleOrKernelWhileRecorded) {
  nn::Sequential seq(Probe{});
  seen.clear();
  seq(zeros({1}));
  EXPECT_EQ(seen, (std::vector<std::string>{"", ""}));  // not recorded
  {
    Recording on;
    seen.clear();
    seq(zeros({1}));
    EXPECT_EQ(seen, (std::vector<std::string>{"nn.Module: Probe", "test_probe_kernel"}));
    EXPECT_EQ(detail::current_allocation_context(), "");  // every name popped
  }
  seen.clear();
  probe_stub(kCPU)();
  EXPECT_EQ(seen, std::vector<std::string>{""});
}

}  // namespace
}  // namespace ember::testing
