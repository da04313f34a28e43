#include "ember/core/dispatch.h"

namespace ember::detail {

constinit std::atomic<const KernelRangeHooks*> g_kernel_range_hooks{nullptr};

}  // namespace ember::detail
