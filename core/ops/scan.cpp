// Frontend of cumsum: output dtype, then the device's kernel.
#include "ember/core/ops/scan.h"

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<CumsumFn> cumsum_stub("cumsum");

namespace {

const OpRegistrar registrar({{"cumsum", AutocastPolicy::Float32, true}});

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("cumsum", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "cumsum", [&](const auto&... t) { return cumsum(t...); }, x, dim, dtype);
  dim = wrap_dim("cumsum", dim, x.dim());
  ScalarType out_dtype = dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
  EMBER_CHECK(out_dtype != kBool, "cumsum: bool is not a supported output dtype");
  Tensor out = empty(x.sizes(), TensorOptions(out_dtype).device(x.device()));
  if (out.numel() > 0) {
    NoGradGuard no_grad;  // the cast and atleast_1d's views are not part of the graph
    cumsum_stub(x.device())(atleast_1d(out), atleast_1d(x.to(out_dtype)), dim);
  }
  // Every input adds to the sums at and after it: the gradient is the reversed running sum.
  if (needs_grad({x}))
    record("cumsum", {x}, {out}, [dim](const GradContext& g) {
      return std::vector<Tensor>{g.grad().flip({dim}).cumsum(dim).flip({dim})};
    });
  return out;
}

Tensor Tensor::cumsum(int64_t dim) const { return ember::cumsum(*this, dim); }

}  // namespace ember
