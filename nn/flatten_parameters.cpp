#include "ember/nn/flatten_parameters.h"

#include <set>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/fused_optim.h"

namespace ember::nn::utils {

std::vector<Tensor> flatten_parameters_(ArrayRef<Tensor> parameters) {
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    EMBER_CHECK(p.defined(), "flatten_parameters_: parameter ", i, " is undefined");
    EMBER_CHECK(seen.insert(p.unsafe_impl()).second, "flatten_parameters_: parameter ", i, " is given twice");
    EMBER_CHECK(p.is_floating_point(), "flatten_parameters_: parameter ", i, " is ", p.dtype(),
                "; only floating point parameters share a buffer");
  }
  NoGradGuard no_grad;
  std::vector<Tensor> buffers;
  // By dtype and device, in order of first appearance.
  for (const std::vector<size_t>& g : group_by_device_and_dtype(parameters)) {
    int64_t total = 0;
    for (size_t i : g) total += parameters[i].numel();
    Tensor flat = empty({total}, parameters[g[0]].options());
    int64_t offset = 0;
    for (size_t i : g) {
      const Tensor& p = parameters[i];
      const Tensor slice = flat.narrow(0, offset, p.numel()).view(p.sizes());
      slice.copy_(p);
      p.set_data(slice);
      offset += p.numel();
    }
    buffers.push_back(flat);
  }
  return buffers;
}

}  // namespace ember::nn::utils
