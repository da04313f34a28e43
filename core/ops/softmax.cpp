// Frontends of softmax and log_softmax and of their backward ops: dim and dtype checks, then the
// device's fused kernel.
#include "ember/core/ops/softmax.h"

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<SoftmaxFn> softmax_stub("softmax");
constinit DispatchStub<SoftmaxBackwardFn> softmax_backward_stub("softmax_backward");

namespace {

const OpRegistrar registrar({
    {"softmax", AutocastPolicy::Float32, true},
    {"log_softmax", AutocastPolicy::Float32, true},
    {"_softmax_backward_data", AutocastPolicy::None, true},
    {"_log_softmax_backward_data", AutocastPolicy::None, true},
});

Tensor backward_data(const char* op, const Tensor& grad_output, const Tensor& output, int64_t dim,
                     ScalarType input_dtype, bool log) {
  EMBER_CHECK(output.is_floating_point() && is_floating_point(input_dtype), op,
              ": expected a floating point output and input_dtype, got ", output.dtype(), " and ",
              input_dtype);
  EMBER_CHECK(grad_output.device() == output.device(), op,
              ": expected grad_output and output on the same device, got ", grad_output.device(), " and ",
              output.device());
  EMBER_CHECK(grad_output.sizes().equals(output.sizes()), op, ": grad_output of shape ", grad_output.sizes(),
              " does not match output of shape ", output.sizes());
  int64_t d = wrap_dim(op, dim, output.dim());
  Tensor y = output.contiguous();
  Tensor gy = grad_output.to(y.dtype()).contiguous();
  Tensor gx = empty(y.sizes(), y.options());
  if (gx.numel() > 0) softmax_backward_stub(y.device())(gx, gy, y, y.dim() == 0 ? 0 : d, log);
  if (needs_grad({gy, y})) {
    // gx is bilinear in (gy, y) for softmax and linear in gy for log_softmax; with G the
    // gradient reaching gx, the sums below run along d.
    SavedTensor sgy(gy, false), sy(y, false);
    record(op, {gy, y}, {gx}, [sgy, sy, d, log](const GradContext& g) -> std::vector<Tensor> {
      Tensor G = g.grad(), gy = g(sgy), y = g(sy), dgy, dy;
      if (log) {
        Tensor e = exp(y);
        if (g.needs(0)) dgy = G - (G * e).sum({d}, true);
        if (g.needs(1)) dy = -(G * e) * gy.sum({d}, true);
      } else {
        if (g.needs(0)) dgy = _softmax_backward_data(G, y, d, y.dtype());
        if (g.needs(1)) dy = G * (gy - (gy * y).sum({d}, true)) - gy * (G * y).sum({d}, true);
      }
      return {dgy, dy};
    });
  }
  return gx.to(input_dtype);
}

Tensor run(const char* op, const Tensor& x, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        op, [&](const Tensor& t) { return run(op, t, dim, dtype, log); }, x);
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
      return {backward_data(log ? "_log_softmax_backward_data" : "_softmax_backward_data", gy, y, d,
                            y.dtype(), log)};
    });
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("softmax", x);
  return run("softmax", x, dim, dtype, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("log_softmax", x);
  return run("log_softmax", x, dim, dtype, true);
}

Tensor _softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                              ScalarType input_dtype) {
  detail::OpRange op_range("_softmax_backward_data", grad_output, output);
  return backward_data("_softmax_backward_data", grad_output, output, dim, input_dtype, false);
}

Tensor _log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                                  ScalarType input_dtype) {
  detail::OpRange op_range("_log_softmax_backward_data", grad_output, output);
  return backward_data("_log_softmax_backward_data", grad_output, output, dim, input_dtype, true);
}

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }

}  // namespace ember
