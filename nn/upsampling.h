#pragma once

// F.interpolate and nn.Upsample: resizing the spatial dims of [N, C, L], [N, C, H, W] or
// [N, C, D, H, W] inputs by "nearest" (any of them), "linear" (3D) or "bilinear" (4D), with
// PyTorch's source-index arithmetic (float32, float64 for float64 inputs) so the same pixels
// are picked and weighted. Built from index_select and pointwise ops: differentiable, on every
// device, and free of host reads (a CUDA graph can hold it).

#include <optional>
#include <string>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/nn/module.h"
#include "ember/nn/module_holder.h"
#include "ember/nn/options.h"

namespace ember::nn {

// Exactly one of size and scale_factor; each has one value for every spatial dim or one per dim.
// align_corners applies to the linear modes only (PyTorch's default false there).
struct InterpolateOptions {
  EMBER_ARG(std::vector<int64_t>, size);
  EMBER_ARG(std::vector<double>, scale_factor);
  EMBER_ARG(std::string, mode) = "nearest";
  EMBER_ARG(std::optional<bool>, align_corners);
};
using UpsampleOptions = InterpolateOptions;

namespace functional {
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);
}  // namespace functional

class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options) : Module("Upsample"), options(options) {}
  Tensor forward(const Tensor& input) { return functional::interpolate(input, options); }
  std::string extra_repr() const override;

  UpsampleOptions options;
};
EMBER_MODULE(Upsample);

}  // namespace ember::nn
