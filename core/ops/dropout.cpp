// dropout's frontends: the fused forward (mask and output in one kernel, the mask drawn as
// ops::DropoutMaskDraw defines it) and its backward, an op of its own so it differentiates again.
#include "ember/core/ops/dropout.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/memory_format.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/dropout_functors.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/nn_util.h"

namespace ember {

constinit DispatchStub<NativeDropoutFn> native_dropout_stub("native_dropout");
constinit DispatchStub<NativeDropoutBackwardFn> native_dropout_backward_stub("native_dropout_backward");
constinit DispatchStub<GeluDropoutBackwardFn> gelu_dropout_backward_stub("gelu_dropout_backward");

namespace {

const OpRegistrar registrar({
    {"dropout", AutocastPolicy::None, true},
    {"native_dropout", AutocastPolicy::None, true},
    {"native_dropout_backward", AutocastPolicy::None, true},
    {"gelu_dropout", AutocastPolicy::None, true},
});

void check_args(const char* op, const Tensor& x, double p) {
  EMBER_CHECK(p >= 0 && p <= 1, op, ": probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK(x.is_floating_point(), op, ": expected a floating point input, got ", x.dtype(), " of shape ",
              x.sizes());
}

// out = input * mask * scale is linear in input: its backward is the same op on out's gradient,
// which records itself again (double backward).
void record_masked_scale(const char* op, const Tensor& input, const Tensor& out, const Tensor& mask,
                         double scale) {
  record(op, {input}, {out},
         [scale, sm = SavedTensor(mask, false)](const GradContext& g) -> std::vector<Tensor> {
           return {native_dropout_backward(g.grad(), g(sm), scale)};
         });
}

// The kernels walk memory in order: out and mask take x's strides (x made dense if it is not),
// so an NHWC x gives an NHWC output, as PyTorch.
Tensor dense_like(const Tensor& x) { return x.is_non_overlapping_and_dense() ? x : x.contiguous(); }

// out = mask ? (gelu ? gelu(x) : x) * scale : 0 and the mask, unrecorded: as bools (native_dropout's)
// or packed bits (gelu_dropout's, only when a backward will read them); the generator state it drew
// from.
struct MaskedForward {
  Tensor out, mask, bits;
  PhiloxState rng;
};
MaskedForward masked_forward(const Tensor& x, double p, Generator* gen, bool gelu, bool keep_bits) {
  // One generator offset per call, even for an empty x, as bernoulli_ takes.
  const PhiloxState rng = (gen ? *gen : default_generator(x.device().type)).next();
  Tensor dense = dense_like(x);
  MaskedForward r{empty_like(dense), {}, {}, rng};
  if (gelu && keep_bits)
    r.bits = empty({(x.numel() + 7) / 8}, TensorOptions(kUInt8).device(x.device()));
  else if (!gelu)
    r.mask = empty_like(dense, TensorOptions(kBool).device(x.device()));
  if (x.numel() > 0) {
    NoGradGuard no_grad;  // recorded by the caller, on x itself
    native_dropout_stub(x.device())(r.out, r.mask, r.bits, dense, p, rng, gelu);
  }
  return r;
}

}  // namespace

Tensor dropout_keep_mask(const Tensor& x, double p, PhiloxState rng) {
  detail::OpRange op_range("dropout_keep_mask", x);
  NoGradGuard no_grad;
  Tensor dense = dense_like(x), out = empty_like(dense);
  Tensor mask = empty_like(dense, TensorOptions(kBool).device(x.device()));
  if (x.numel() > 0) native_dropout_stub(x.device())(out, mask, Tensor(), dense, p, rng, false);
  return mask;
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::OpRange op_range("native_dropout", x);
  check_args("native_dropout", x, p);
  if (!training || p == 0) return {x.clone(), ones(x.sizes(), TensorOptions(kBool).device(x.device()))};
  MaskedForward f = masked_forward(x, p, gen, false, false);
  if (needs_grad({x})) record_masked_scale("native_dropout", x, f.out, f.mask, ops::dropout_scale(p));
  return {f.out, f.mask};
}

Tensor gelu_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::OpRange op_range("gelu_dropout", x);
  check_args("gelu_dropout", x, p);
  if (!training || p == 0) return gelu(x);
  const bool backward = needs_grad({x});
  MaskedForward f = masked_forward(x, p, gen, true, backward);
  if (backward)
    record("gelu_dropout", {x}, {f.out},
           [p, rng = f.rng, sx = SavedTensor(x, false),
            sbits = SavedTensor(f.bits, false)](const GradContext& g) -> std::vector<Tensor> {
             const Tensor grad = g.grad(), input = g(sx);
             // create_graph: the two ops' differentiable backwards.
             if (GradMode::is_enabled())
               return {gelu_backward(
                   native_dropout_backward(grad, dropout_keep_mask(input, p, rng), ops::dropout_scale(p)),
                   input)};
             // The kernel walks the three in the memory order the forward drew the mask in.
             const Tensor dense = dense_like(input);
             const Tensor gd = grad.strides().equals(dense.strides()) ? grad : empty_like(dense).copy_(grad);
             Tensor grad_input = empty_like(dense);
             // The bias gradient of the linear before it, summed where grad_input is written
             // (BackwardExtras).
             Tensor sums =
                 g.row_sums_wanted(0) && dense.is_contiguous() && dense.dim() > 0 && grad.numel() > 0
                     ? empty({dense.size(-1)}, dense.options().dtype(nn_detail::compute_dtype(dense.dtype())))
                     : Tensor();
             if (grad.numel() > 0)
               gelu_dropout_backward_stub(grad.device())(grad_input, sums, gd, dense, g(sbits), p);
             if (sums.defined()) g.set_row_sums(0, sums);
             return {grad_input};
           });
  return f.out;
}

Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale) {
  detail::OpRange op_range("native_dropout_backward", grad_output, mask);
  const char* op = "native_dropout_backward";
  EMBER_CHECK(grad_output.is_floating_point(), op, ": expected a floating point grad_output, got ",
              grad_output.dtype(), " of shape ", grad_output.sizes());
  EMBER_CHECK(mask.dtype() == kBool, op, ": mask should be a bool tensor, got ", mask.dtype(), " of shape ",
              mask.sizes());
  EMBER_CHECK(mask.sizes().equals(grad_output.sizes()), op, ": mask of shape ", mask.sizes(),
              " does not match grad_output of shape ", grad_output.sizes());
  EMBER_CHECK(mask.device() == grad_output.device(), op, ": mask is on ", mask.device(), ", grad_output on ",
              grad_output.device());
  Tensor grad_input = empty_like_layout(grad_output.sizes(), grad_output.options(), {grad_output, mask});
  if (grad_output.numel() > 0)
    native_dropout_backward_stub(grad_output.device())(grad_input, grad_output, mask, scale);
  if (needs_grad({grad_output})) record_masked_scale(op, grad_output, grad_input, mask, scale);
  return grad_input;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::OpRange op_range("dropout", x);
  check_args("dropout", x, p);
  if (!training || p == 0) return x;
  return std::get<0>(native_dropout(x, p, training, gen));
}

}  // namespace ember
