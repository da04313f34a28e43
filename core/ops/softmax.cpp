// Frontends of softmax and log_softmax: dim and dtype checks, then the device's fused kernel.
#include "ember/core/ops/softmax.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<SoftmaxFn> softmax_stub("softmax");

namespace {

const OpRegistrar registrar({
    {"softmax", AutocastPolicy::Float32, true},
    {"log_softmax", AutocastPolicy::Float32, true},
});

Tensor run(const char* op, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype,
           bool log) {
  int64_t d = wrap_dim(op, dim, x.dim());
  Tensor in = dtype ? x.to(*dtype) : x;
  EMBER_CHECK(in.is_floating_point(), op,
              ": expected a floating point input (or a floating dtype "
              "argument), got ",
              in.dtype());
  in = in.contiguous();
  Tensor out = empty(in.sizes(), in.options());
  // A 0-dim tensor is one row of one element.
  if (out.numel() > 0) softmax_stub(in.device())(out, in, in.dim() == 0 ? 0 : d, log);
  if (needs_grad({in})) {
    // Both formulas use only the output, so they differentiate again through this node.
    SavedTensor so(out, true);
    record(op, {in}, {out}, [so, d, log](const GradContext& g) -> std::vector<Tensor> {
      Tensor y = g(so), gy = g.grad();
      if (y.dim() == 0) return {zeros_like(gy)};  // one element: a constant output
      if (log) return {gy - exp(y) * gy.sum({d}, true)};
      return {y * (gy - (gy * y).sum({d}, true))};
    });
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return run("softmax", x, dim, dtype, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return run("log_softmax", x, dim, dtype, true);
}

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }

}  // namespace ember
