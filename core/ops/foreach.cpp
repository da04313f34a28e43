// Frontends of the list ops: every pair checked here, so the kernels see one device, one dtype
// and contiguous memory.
#include "ember/core/ops/foreach.h"

#include <vector>

#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/fused_optim.h"

namespace ember {

constinit DispatchStub<ForeachCopyFn> foreach_copy_stub("_foreach_copy_");

namespace {

const OpRegistrar registrar({
    {"_foreach_copy_", AutocastPolicy::None, false},
});

}  // namespace

void _foreach_copy_(ArrayRef<Tensor> self, ArrayRef<Tensor> src) {
  detail::OpRange op_range("_foreach_copy_", self, src);
  const char* op = "_foreach_copy_";
  EMBER_CHECK(!self.empty(), op, ": Tensor list must have at least one tensor");
  EMBER_CHECK(self.size() == src.size(), op, ": Tensor lists must have the same number of tensors, got ",
              self.size(), " and ", src.size());
  std::vector<Tensor> dsts, srcs;  // the kernel's pairs
  std::vector<size_t> one_by_one;
  for (size_t i = 0; i < self.size(); ++i) {
    const Tensor &d = self[i], &s = src[i];
    EMBER_CHECK(d.defined(), op, ": self[", i, "] is undefined");
    EMBER_CHECK(s.defined(), op, ": src[", i, "] is undefined");
    EMBER_CHECK(d.sizes().equals(s.sizes()), op, ": self[", i, "] has shape ", d.sizes(), ", src[", i,
                "] has shape ", s.sizes());
    check_no_internal_overlap(op, d);
    check_inplace(op, {d, s});
    if (d.numel() == 0) continue;
    if (d.device() == s.device() && d.dtype() == s.dtype() && d.is_contiguous() && s.is_contiguous()) {
      dsts.push_back(d);
      srcs.push_back(s);
    } else {
      one_by_one.push_back(i);
    }
  }
  for (const std::vector<size_t>& same : group_by_device_and_dtype(dsts)) {
    std::vector<Tensor> d, s;
    for (size_t i : same) {
      d.push_back(dsts[i]);
      s.push_back(srcs[i]);
    }
    foreach_copy_stub(d[0].device())(d, s);
  }
  for (const Tensor& d : dsts) d.bump_version();
  for (size_t i : one_by_one) self[i].copy_(src[i]);
}

}  // namespace ember
