// Frontends of the binary elementwise ops, where and masked_fill: broadcasting, type
// promotion and in-place rules, then the device's kernel.
#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"
#include "ember/core/type_promotion.h"

namespace ember {

constinit DispatchStub<BinaryFn> binary_stub("binary", DeviceMix::CpuScalars);
constinit DispatchStub<WhereFn> where_stub("where", DeviceMix::CpuScalars);

namespace {

using ops::BinaryOp;
constexpr auto NONE = AutocastPolicy::None;

// The elementwise binary ops already compute in the widest dtype of their inputs (type
// promotion), so autocast leaves them alone, as PyTorch: a 0-dim float32 tensor times a bfloat16
// one stays bfloat16.
const OpRegistrar registrar({
    {"add", NONE, true},
    {"sub", NONE, true},
    {"mul", NONE, true},
    {"div", NONE, true},
    {"pow", AutocastPolicy::Float32, true},
    {"maximum", NONE, true},
    {"minimum", NONE, true},
    {"eq", NONE, false},
    {"ne", NONE, false},
    {"lt", NONE, false},
    {"le", NONE, false},
    {"gt", NONE, false},
    {"ge", NONE, false},
    {"logical_and", NONE, false},
    {"logical_or", NONE, false},
    {"logical_xor", NONE, false},
    {"logical_not", NONE, false},
    {"where", NONE, true},
    {"masked_fill", NONE, true},
    {"gelu_backward", NONE, true},
    {"threshold_backward", NONE, true},
});

constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

struct Dtypes {
  ScalarType compute, out;
};

Dtypes binary_dtypes(const char* name, BinaryOp op, ScalarType common) {
  if (ops::is_logical(op)) return {kBool, kBool};
  if (ops::is_comparison(op)) return {common, kBool};
  if (op == BinaryOp::Div) return {to_float_dtype(common), to_float_dtype(common)};
  EMBER_CHECK(common != kBool || (op != BinaryOp::Sub && op != BinaryOp::Pow), name,
              ": not supported for two bool tensors (use logical ops instead)");
  return {common, common};
}

// A 0-dim CPU tensor (a wrapped Scalar above all) goes with tensors on any device, as in PyTorch:
// the CUDA kernels read it on the host and pass its value to the kernel.
bool is_cpu_scalar(const Tensor& t) { return t.is_cpu() && t.dim() == 0; }

// The device of an op's operands (their first that is not a CPU scalar); throws naming `name`
// when they disagree.
Device common_device(const char* name, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (is_cpu_scalar(t)) continue;
    if (!first) first = &t;
    EMBER_CHECK(t.device() == first->device(), name,
                ": expected all tensors to be on the same device, but found ", first->device(), " and ",
                t.device());
  }
  return first ? first->device() : Device(kCPU);
}

// In place, the result stays on self's device: only a CPU scalar may come from elsewhere.
void check_devices_inplace(const char* name, const Tensor& self, const Tensor& b) {
  EMBER_CHECK(b.device() == self.device() || is_cpu_scalar(b), name,
              ": expected all tensors to be on the same device, but found ", self.device(), " and ",
              b.device());
}

ops::ElementwiseParams alpha_params(const char* name, const Scalar& alpha, ScalarType common) {
  EMBER_CHECK(is_floating_point(common) || !alpha.is_floating_point(), name,
              ": for integral input tensors, argument alpha must not be a floating point number");
  return {alpha.to_double()};
}

// A scalar operand as a 0-dim CPU tensor, whatever the other operands' device. Its dtype is wide
// (double or int64): the kernel reads it as the compute dtype, so promotion is already decided.
Tensor wrap(const Scalar& s) {
  ScalarType t = s.is_floating_point() ? kFloat64 : s.default_dtype();
  return full({}, s, TensorOptions(t));
}

// d(out)/da and d(out)/db of the differentiable binary ops, times g, summed back to each
// input's shape (a_sizes, b_sizes) where it was broadcast. a and b are only saved when
// uses_values(op).
std::vector<Tensor> binary_backward(BinaryOp op, const GradContext& ctx, const Tensor& a, const Tensor& b,
                                    const Tensor& out, double alpha, const DimVector& a_sizes,
                                    const DimVector& b_sizes) {
  const Tensor& g = ctx.grad();
  Tensor ga, gb;
  switch (op) {
    case BinaryOp::Add:  // alpha 1 (a residual add): the gradient itself, no pass over it
      ga = g, gb = !ctx.needs(1) ? Tensor() : alpha == 1 ? g : g * alpha;
      break;
    case BinaryOp::Sub:
      ga = g, gb = ctx.needs(1) ? g * -alpha : Tensor();
      break;
    case BinaryOp::Mul:
      ga = ctx.needs(0) ? g * b : Tensor(), gb = ctx.needs(1) ? g * a : Tensor();
      break;
    case BinaryOp::Div:
      ga = g / b, gb = ctx.needs(1) ? -g * a / (b * b) : Tensor();
      break;
    case BinaryOp::Pow:
      ga = ctx.needs(0) ? g * b * pow(a, b - 1) : Tensor();
      // d/db a^b = a^b log a, taken as 0 where a == 0 (the limit for b > 0), as PyTorch.
      gb = ctx.needs(1) ? (g * out * log(a)).masked_fill(a == 0, 0) : Tensor();
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      // Ties split the gradient evenly, as PyTorch.
      bool max = op == BinaryOp::Maximum;
      Tensor tie = (a == b) * 0.5;
      ga = g * ((max ? a > b : a < b) + tie);
      gb = g * ((max ? b > a : b < a) + tie);
      break;
    }
    case BinaryOp::GeluBackward:  // a = grad, b = x: linear in a; d/dx (Phi + x phi) = phi (2 - x^2)
      ga = ctx.needs(0) ? gelu_backward(g, b) : Tensor();
      gb = ctx.needs(1) ? g * a * exp(b * b * -0.5) * kInvSqrt2Pi * (2 - b * b) : Tensor();
      break;
    case BinaryOp::ThresholdBackward:  // a = self, b = grad, alpha = threshold: flat in a, linear in b
      ga = ctx.needs(0) ? zeros_like(a) : Tensor();
      gb = ctx.needs(1) ? threshold_backward(g, a, alpha) : Tensor();
      break;
    default:
      break;
  }
  return {ga.defined() && ctx.needs(0) ? sum_to(ga, a_sizes) : Tensor(),
          gb.defined() && ctx.needs(1) ? sum_to(gb, b_sizes) : Tensor()};
}

bool differentiable(BinaryOp op) { return !ops::is_comparison(op) && !ops::is_logical(op); }
bool uses_values(BinaryOp op) { return op != BinaryOp::Add && op != BinaryOp::Sub; }

// Records the backward of `out = a op b`; `a_value` is a's value before the op (a clone when
// the op wrote into a).
void record_binary(const char* name, BinaryOp op, const Tensor& a, const Tensor& a_value, const Tensor& b,
                   const Tensor& out, double alpha) {
  bool values = uses_values(op);
  SavedTensor sa(values ? a_value : Tensor(), false), sb(values ? b : Tensor(), false);
  SavedTensor so(op == BinaryOp::Pow ? out : Tensor(), true);
  DimVector a_sizes(a.sizes()), b_sizes(b.sizes());
  Device da = a.device(), db = b.device();
  record(name, {a, b}, {out}, [=](const GradContext& g) {
    std::vector<Tensor> grads = binary_backward(op, g, g(sa), g(sb), g(so), alpha, a_sizes, b_sizes);
    // A CPU scalar operand of a CUDA op gets its gradient on the CPU.
    if (grads[0].defined()) grads[0] = grads[0].to(da);
    if (grads[1].defined()) grads[1] = grads[1].to(db);
    return grads;
  });
}

Tensor run(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, ScalarType common,
           ops::ElementwiseParams p = {}) {
  Device device = common_device(name, {a, b});
  Dtypes dt = binary_dtypes(name, op, common);
  Tensor out = empty_like_layout(broadcast_shapes(name, a.sizes(), b.sizes()),
                                 TensorOptions(dt.out).device(device), {a, b});
  if (out.numel() > 0) binary_stub(device)(op, dt.compute, out, a, b, p);
  if (differentiable(op) && needs_grad({a, b})) record_binary(name, op, a, a, b, out, p.a);
  return out;
}

const Tensor& run_(const char* name, BinaryOp op, const Tensor& self, const Tensor& b, ScalarType common,
                   ops::ElementwiseParams p = {}) {
  check_devices_inplace(name, self, b);
  Dtypes dt = binary_dtypes(name, op, common);
  check_can_cast(name, dt.out, self.dtype());
  DimVector shape = broadcast_shapes(name, self.sizes(), b.sizes());
  EMBER_CHECK(IntArrayRef(shape).equals(self.sizes()), name, ": output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", IntArrayRef(shape));
  check_no_internal_overlap(name, self);
  check_no_partial_overlap(name, self, b);
  check_inplace_differentiable(name, self);
  bool grad = differentiable(op) && needs_grad({self, b});
  Tensor before = grad && uses_values(op) ? self.detach().clone() : Tensor();
  if (self.numel() > 0) binary_stub(self.device())(op, dt.compute, self, self, b, p);
  self.bump_version();
  if (grad) record_binary(name, op, self, before, b, self, p.a);
  return self;
}

Tensor run(const char* name, BinaryOp op, const Tensor& a, const Scalar& b, ops::ElementwiseParams p = {}) {
  return run(name, op, a, wrap(b), result_type(a, b), p);
}

const Tensor& run_(const char* name, BinaryOp op, const Tensor& self, const Scalar& b,
                   ops::ElementwiseParams p = {}) {
  return run_(name, op, self, wrap(b), result_type(self, b), p);
}

// A frontend that is run() alone, in its op's type: its range, then run().
Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  detail::OpRange op_range(name, a, b);
  return run(name, op, a, b, result_type(a, b));
}
Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Scalar& b) {
  detail::OpRange op_range(name, a);
  return run(name, op, a, b);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  detail::OpRange op_range("add", a, b);
  ScalarType c = result_type(a, b);
  return run("add", BinaryOp::Add, a, b, c, alpha_params("add", alpha, c));
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  detail::OpRange op_range("add", a);
  return run("add", BinaryOp::Add, a, b, alpha_params("add", alpha, result_type(a, b)));
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  detail::OpRange op_range("sub", a, b);
  ScalarType c = result_type(a, b);
  return run("sub", BinaryOp::Sub, a, b, c, alpha_params("sub", alpha, c));
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  detail::OpRange op_range("sub", a);
  return run("sub", BinaryOp::Sub, a, b, alpha_params("sub", alpha, result_type(a, b)));
}
Tensor rsub(const Tensor& a, const Scalar& b) {
  detail::OpRange op_range("rsub", a);
  return run("rsub", BinaryOp::Sub, wrap(b), a, result_type(a, b), {1.0});
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op("mul", BinaryOp::Mul, a, b); }

Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate) {
  detail::OpRange op_range("gelu_backward", grad_output, self);
  constexpr const char* kOp = "gelu_backward";
  EMBER_CHECK(approximate == "none" || approximate == "tanh", kOp,
              ": approximate must be 'none' or 'tanh', got '", approximate, "'");
  const ScalarType common = result_type(grad_output, self);
  EMBER_CHECK(is_floating_point(common), kOp, ": expected floating point inputs, got grad_output ",
              grad_output.dtype(), " and self ", self.dtype());
  if (approximate == "none") return run(kOp, BinaryOp::GeluBackward, grad_output, self, common);
  // The tanh form as a composite: it differentiates again through its parts.
  constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
  const Tensor& x = self;
  Tensor x2 = x * x;
  Tensor t = tanh((x + x2 * x * 0.044715) * kSqrt2OverPi);
  Tensor dinner = (x2 * (3 * 0.044715) + 1) * kSqrt2OverPi;
  return grad_output * ((t + 1) * 0.5 + x * (1 - t * t) * dinner * 0.5);
}
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  detail::OpRange op_range("threshold_backward", grad_output, self);
  constexpr const char* kOp = "threshold_backward";
  const ScalarType common = result_type(grad_output, self);
  EMBER_CHECK(is_floating_point(common), kOp, ": expected floating point inputs, got grad_output ",
              grad_output.dtype(), " and self ", self.dtype());
  // self first: the result takes its layout, as PyTorch's (relu's output, NHWC in a channels-last net).
  return run(kOp, BinaryOp::ThresholdBackward, self, grad_output, common, {threshold.to_double()});
}
Tensor mul(const Tensor& a, const Scalar& b) { return binary_op("mul", BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op("div", BinaryOp::Div, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary_op("div", BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& e) {
  detail::OpRange op_range("pow", a, e);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "pow", [&](const auto&... t) { return pow(t...); }, a, e);
  return run("pow", BinaryOp::Pow, a, e, result_type(a, e));
}
Tensor pow(const Tensor& a, const Scalar& e) {
  detail::OpRange op_range("pow", a);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "pow", [&](const auto&... t) { return pow(t...); }, a, e);
  EMBER_CHECK(is_floating_point(result_type(a, e)) || e.to_long() >= 0,
              "pow: integers to negative integer powers are not allowed");
  return run("pow", BinaryOp::Pow, a, e);
}
Tensor pow(const Scalar& base, const Tensor& e) {
  detail::OpRange op_range("pow", e);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "pow", [&](const auto&... t) { return pow(t...); }, base, e);
  return run("pow", BinaryOp::Pow, wrap(base), e, result_type(e, base));
}
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op("maximum", BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op("minimum", BinaryOp::Minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary_op("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_op("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_op("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_op("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_op("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_op("ge", BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return binary_op("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return binary_op("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return binary_op("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return binary_op("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return binary_op("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return binary_op("ge", BinaryOp::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("logical_and", a, b);
  return run("logical_and", BinaryOp::LogicalAnd, a, b, kBool);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("logical_or", a, b);
  return run("logical_or", BinaryOp::LogicalOr, a, b, kBool);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("logical_xor", a, b);
  return run("logical_xor", BinaryOp::LogicalXor, a, b, kBool);
}
Tensor logical_not(const Tensor& a) {
  detail::OpRange op_range("logical_not", a);
  return run("logical_not", BinaryOp::Eq, a, zeros({}, kBool), kBool);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::OpRange op_range("where", cond, a, b);
  EMBER_CHECK(cond.dtype() == kBool, "where: expected condition to be a bool tensor, got ", cond.dtype());
  Device device = common_device("where", {cond, a, b});
  DimVector shape = broadcast_shapes("where", broadcast_shapes("where", cond.sizes(), a.sizes()), b.sizes());
  Tensor out = empty_like_layout(shape, TensorOptions(result_type(a, b)).device(device), {cond, a, b});
  if (out.numel() > 0) where_stub(device)(out, cond, a, b);
  if (needs_grad({a, b})) {
    DimVector sa(a.sizes()), sb(b.sizes());
    Device da = a.device(), db = b.device();
    record("where", {cond, a, b}, {out}, [=](const GradContext& g) -> std::vector<Tensor> {
      Tensor zero = zeros({}, g.grad().options());
      return {Tensor(), g.needs(1) ? sum_to(where(cond, g.grad(), zero), sa).to(da) : Tensor(),
              g.needs(2) ? sum_to(where(cond, zero, g.grad()), sb).to(db) : Tensor()};
    });
  }
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  detail::OpRange op_range("where", cond, a);
  Tensor bt = wrap(b);
  return where(cond, a, bt.to(result_type(a, b)));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  detail::OpRange op_range("where", cond, b);
  Tensor at = wrap(a);
  return where(cond, at.to(result_type(b, a)), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  detail::OpRange op_range("masked_fill", x, mask);
  EMBER_CHECK(mask.dtype() == kBool, "masked_fill: expected a bool mask, got ", mask.dtype());
  Device device = common_device("masked_fill", {x, mask});
  // Contiguous whatever x's layout, as PyTorch (its masked_fill fills a contiguous clone).
  Tensor out = empty(broadcast_shapes("masked_fill", x.sizes(), mask.sizes()), x.options().device(device));
  if (out.numel() > 0) where_stub(device)(out, mask, wrap(value), x);
  if (needs_grad({x})) {
    DimVector sx(x.sizes());
    record("masked_fill", {x}, {out},
           [mask, sx, dx = x.device()](const GradContext& g) -> std::vector<Tensor> {
             return {sum_to(g.grad().masked_fill(mask, 0), sx).to(dx)};
           });
  }
  return out;
}

const Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) const {
  detail::OpRange op_range("masked_fill_", *this, mask);
  EMBER_CHECK(mask.dtype() == kBool, "masked_fill_: expected a bool mask, got ", mask.dtype());
  check_devices_inplace("masked_fill_", *this, mask);
  DimVector shape = broadcast_shapes("masked_fill_", sizes(), mask.sizes());
  EMBER_CHECK(IntArrayRef(shape).equals(sizes()), "masked_fill_: mask of shape ", mask.sizes(),
              " cannot be broadcast to the tensor's shape ", sizes());
  check_no_internal_overlap("masked_fill_", *this);
  check_inplace("masked_fill_", {*this});
  if (numel() > 0) where_stub(device())(*this, mask, wrap(value), *this);
  bump_version();
  return *this;
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return ember::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return ember::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return ember::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return ember::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return ember::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return ember::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ember::div(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return ember::div(*this, o); }
Tensor Tensor::pow(const Tensor& e) const { return ember::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return ember::pow(*this, e); }
Tensor Tensor::maximum(const Tensor& o) const { return ember::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return ember::minimum(*this, o); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& v) const {
  return ember::masked_fill(*this, mask, v);
}

const Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) const {
  detail::OpRange op_range("add_", *this, o);
  ScalarType c = result_type(*this, o);
  return run_("add_", BinaryOp::Add, *this, o, c, alpha_params("add_", alpha, c));
}
const Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) const {
  detail::OpRange op_range("add_", *this);
  return run_("add_", BinaryOp::Add, *this, o, alpha_params("add_", alpha, result_type(*this, o)));
}
const Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) const {
  detail::OpRange op_range("sub_", *this, o);
  ScalarType c = result_type(*this, o);
  return run_("sub_", BinaryOp::Sub, *this, o, c, alpha_params("sub_", alpha, c));
}
const Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) const {
  detail::OpRange op_range("sub_", *this);
  return run_("sub_", BinaryOp::Sub, *this, o, alpha_params("sub_", alpha, result_type(*this, o)));
}
const Tensor& Tensor::mul_(const Tensor& o) const {
  detail::OpRange op_range("mul_", *this, o);
  return run_("mul_", BinaryOp::Mul, *this, o, result_type(*this, o));
}
const Tensor& Tensor::mul_(const Scalar& o) const {
  detail::OpRange op_range("mul_", *this);
  return run_("mul_", BinaryOp::Mul, *this, o);
}
const Tensor& Tensor::div_(const Tensor& o) const {
  detail::OpRange op_range("div_", *this, o);
  return run_("div_", BinaryOp::Div, *this, o, result_type(*this, o));
}
const Tensor& Tensor::div_(const Scalar& o) const {
  detail::OpRange op_range("div_", *this);
  return run_("div_", BinaryOp::Div, *this, o);
}
const Tensor& Tensor::pow_(const Scalar& e) const {
  detail::OpRange op_range("pow_", *this);
  return run_("pow_", BinaryOp::Pow, *this, e);
}

Tensor Tensor::eq(const Tensor& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ember::ge(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return ember::ge(*this, o); }
Tensor Tensor::logical_not() const { return ember::logical_not(*this); }
Tensor Tensor::logical_and(const Tensor& o) const { return ember::logical_and(*this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return ember::logical_or(*this, o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return ember::logical_xor(*this, o); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) {
  detail::OpRange op_range("div", b);
  return run("div", BinaryOp::Div, wrap(a), b, result_type(b, a));
}
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }
const Tensor& operator+=(const Tensor& a, const Tensor& b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, const Tensor& b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, const Tensor& b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, const Tensor& b) { return a.div_(b); }
const Tensor& operator+=(const Tensor& a, const Scalar& b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, const Scalar& b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, const Scalar& b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, const Scalar& b) { return a.div_(b); }

}  // namespace ember
