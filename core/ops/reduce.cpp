// Frontends of the reductions: dims, output dtype and shape, empty-input rules, then the
// device's kernel.
#include "ember/core/ops/reduce.h"

#include <bit>
#include <cmath>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"
#include "ember/core/type_promotion.h"

namespace ember {

constinit DispatchStub<ReduceFn> reduce_stub("reduce");

namespace {

using ops::ReduceOp;
using ops::ReduceParams;
constexpr auto F32 = AutocastPolicy::Float32;
constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({
    {"sum", F32, true},
    {"mean", F32, true},
    {"prod", F32, true},
    {"max", NONE, true},
    {"min", NONE, true},
    {"amax", NONE, true},
    {"amin", NONE, true},
    {"argmax", NONE, false},
    {"argmin", NONE, false},
    {"var", F32, true},
    {"std", F32, true},
    {"norm", F32, true},
    {"logsumexp", F32, true},
    {"all", NONE, false},
    {"any", NONE, false},
});

bool reduces(uint64_t mask, int64_t d) { return mask >> d & 1; }

struct Reduction {
  Tensor values, indices;
};

// Runs `op` over the dims in `mask` into fresh outputs of dtype `out_dtype` (and int64 indices).
Reduction reduce(ReduceOp op, const Tensor& x, uint64_t mask, bool keepdim, ScalarType out_dtype,
                 ReduceParams p = {}, bool with_indices = false) {
  DimVector kept_shape(x.sizes()), out_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduces(mask, d))
      kept_shape[d] = 1;
    else
      out_shape.push_back(x.size(d));
  }
  TensorOptions opts = TensorOptions(out_dtype).device(x.device());
  Reduction r{empty(kept_shape, opts), Tensor()};
  if (with_indices) r.indices = empty(kept_shape, TensorOptions(kInt64).device(x.device()));
  if (r.values.numel() > 0) reduce_stub(x.device())(op, r.values, r.indices, x, mask, p);
  if (!keepdim) {
    r.values = r.values.view(out_shape);
    if (with_indices) r.indices = r.indices.view(out_shape);
  }
  return r;
}

bool reduces_empty_dim(const Tensor& x, uint64_t mask) {
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduces(mask, d) && x.size(d) == 0) return true;
  return false;
}

// max, min, argmax... have no identity: each reduced dim must be nonempty.
void check_nonempty(const char* name, const Tensor& x, uint64_t mask, bool full) {
  EMBER_CHECK(!full || x.numel() > 0, name, ": expected reduction dim to be specified for ",
              "input.numel() == 0 (input of shape ", x.sizes(), ")");
  for (int64_t d = 0; d < x.dim(); ++d)
    EMBER_CHECK(!reduces(mask, d) || x.size(d) > 0, name, ": expected reduction dim ", d,
                " to have non-zero size (input of shape ", x.sizes(), ")");
}

void check_floating(const char* name, const Tensor& x) {
  EMBER_CHECK(x.is_floating_point(), name, ": expected a floating point input, got ", x.dtype());
}

// A reduced tensor (a gradient, an output) with the reduced dims back as size 1, so that it
// broadcasts against the input.
Tensor unreduce(Tensor t, size_t ndim, uint64_t mask, bool keepdim) {
  if (!keepdim)
    for (size_t d = 0; d < ndim; ++d)
      if (reduces(mask, static_cast<int64_t>(d))) t = t.unsqueeze(static_cast<int64_t>(d));
  return t;
}

DimVector dims_of(uint64_t mask, int64_t ndim) {
  DimVector dims;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduces(mask, d)) dims.push_back(d);
  return dims;
}

int64_t reduced_numel(const Tensor& x, uint64_t mask) {
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduces(mask, d)) n *= x.size(d);
  return n;
}

// The gradient of a sum over `mask` (times `scale`): the output gradient broadcast back over
// the reduced dims.
Tensor record_reduction(const char* name, const Tensor& x, Tensor out, uint64_t mask, bool keepdim,
                        double scale) {
  if (!needs_grad({x})) return out;
  DimVector sizes(x.sizes());
  record(name, {x}, {out}, [sizes, mask, keepdim, scale](const GradContext& g) -> std::vector<Tensor> {
    Tensor grad = unreduce(g.grad(), sizes.size(), mask, keepdim).expand(sizes);
    return {scale == 1.0 ? grad : grad * scale};
  });
  return out;
}

// The input gradient from the output gradient `g`, the input `x` and the output `out`
// (undefined unless saved), `g` and `out` with the reduced dims kept.
using ReduceFormula = std::function<Tensor(const Tensor& g, const Tensor& x, const Tensor& out)>;

// Records a reduction of `x` over `mask` whose formula needs the input (and the output if
// `save_out`).
Tensor record_reduction(const char* name, const Tensor& x, Tensor out, uint64_t mask, bool keepdim,
                        bool save_out, ReduceFormula formula) {
  if (!needs_grad({x})) return out;
  SavedTensor sx(x, false), so(save_out ? out : Tensor(), true);
  size_t ndim = x.sizes().size();
  record(name, {x}, {out}, [=](const GradContext& g) -> std::vector<Tensor> {
    Tensor o = g(so);
    if (o.defined()) o = unreduce(o, ndim, mask, keepdim);
    return {formula(unreduce(g.grad(), ndim, mask, keepdim), g(sx), o)};
  });
  return out;
}

// max, min, amax, amin (of `x`, or of |x| for the inf norms): the gradient is shared evenly
// among the elements equal to the extreme (NaN counting as equal to a NaN result).
Tensor extreme_grad(const Tensor& g, const Tensor& x, const Tensor& out, uint64_t mask) {
  Tensor hit = x == out || (x != x && out != out);
  return where(hit, g / hit.sum(dims_of(mask, x.dim()), true), 0.0);
}

ScalarType sum_dtype(const Tensor& x, std::optional<ScalarType> dtype) {
  return dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
}

Tensor prod_impl(const Tensor& x, uint64_t mask, bool keepdim, std::optional<ScalarType> dtype);

// d prod / d x_i is the product of the other elements of its slice: out / x_i without zeros.
// With zeros, the product of the other nonzeros times that of the other zeros, the latter
// written so that its value (1 or 0) and its first derivative are right, and so the second
// derivatives too: 1 without other zeros, the other zero itself if there is one, else 0.
Tensor prod_grad(const Tensor& g, const Tensor& x, const Tensor& out, uint64_t mask) {
  Tensor zero = x == 0;
  if (!zero.any().item<bool>()) return g * out / x;
  DimVector dims = dims_of(mask, x.dim());
  Tensor safe = where(zero, 1.0, x), zeros_only = where(zero, x, 0.0);
  Tensor other_nonzeros = prod_impl(safe, mask, true, out.dtype()) / safe;
  Tensor other_zeros = zero.sum(dims, true) - zero.to(kInt64);
  Tensor other_zero = zeros_only.sum(dims, true) - zeros_only;
  return g * other_nonzeros * where(other_zeros == 0, 1.0, other_zero * (other_zeros == 1));
}

Tensor prod_impl(const Tensor& x, uint64_t mask, bool keepdim, std::optional<ScalarType> dtype) {
  Tensor out = reduce(ReduceOp::Prod, x, mask, keepdim, sum_dtype(x, dtype)).values;
  return record_reduction(
      "prod", x, out, mask, keepdim, true,
      [mask](const Tensor& g, const Tensor& x, const Tensor& out) { return prod_grad(g, x, out, mask); });
}

Tensor mean_impl(const Tensor& x, uint64_t mask, bool keepdim, std::optional<ScalarType> dtype) {
  EMBER_CHECK(dtype || x.is_floating_point(), "mean: could not infer output dtype. Input dtype ",
              "must be a floating point dtype, got ", x.dtype(), " (pass a floating dtype)");
  ScalarType out = dtype.value_or(x.dtype());
  EMBER_CHECK(is_floating_point(out), "mean: dtype must be a floating point dtype, got ", out);
  int64_t count = reduced_numel(x, mask);
  return record_reduction("mean", x, reduce(ReduceOp::Mean, x, mask, keepdim, out).values, mask, keepdim,
                          count > 0 ? 1.0 / static_cast<double>(count) : 0.0);
}

// d var / d x = 2 (x - mean) / (N - correction), infinite where N <= correction (as var's
// division by max(0, N - correction)).
Tensor var_grad(const Tensor& g, const Tensor& x, uint64_t mask, int64_t correction) {
  double dof = static_cast<double>(reduced_numel(x, mask) - correction);
  double scale = dof > 0 ? 2 / dof : INFINITY;
  return g * scale * (x - mean_impl(x, mask, true, std::nullopt));
}

Tensor extreme(const char* name, ReduceOp op, const Tensor& x, IntArrayRef dims, bool keepdim) {
  uint64_t mask = dim_mask(name, dims, x.dim());
  check_nonempty(name, x, mask, dims.empty());
  Tensor out = reduce(op, x, mask, keepdim, x.dtype()).values;
  return record_reduction(
      name, x, out, mask, keepdim, true,
      [mask](const Tensor& g, const Tensor& x, const Tensor& out) { return extreme_grad(g, x, out, mask); });
}

std::tuple<Tensor, Tensor> extreme_dim(const char* name, ReduceOp op, const Tensor& x, int64_t dim,
                                       bool keepdim) {
  uint64_t mask = dim_mask(name, dim, x.dim());
  check_nonempty(name, x, mask, false);
  Reduction r = reduce(op, x, mask, keepdim, x.dtype(), {}, true);
  if (needs_grad({x})) {
    // The gradient goes to the returned index of each slice.
    SavedTensor si(r.indices, false);
    DimVector sizes(x.sizes());
    record(name, {x}, {r.values}, [si, sizes, mask, keepdim](const GradContext& g) -> std::vector<Tensor> {
      size_t ndim = sizes.size();
      Tensor grad = unreduce(g.grad(), ndim, mask, keepdim);
      if (ndim == 0) return {grad};
      int64_t d = std::countr_zero(mask);
      DimVector along(ndim, 1);
      along[d] = sizes[d];
      Tensor pos = arange(sizes[d], TensorOptions(kInt64).device(grad.device())).view(along);
      return {where(pos == unreduce(g(si), ndim, mask, keepdim), grad, 0.0)};
    });
  }
  return {r.values, r.indices};
}

// Without a dim, the index is the flat (row-major) one.
Tensor arg_extreme(const char* name, ReduceOp op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  uint64_t mask = dim ? dim_mask(name, *dim, x.dim()) : dim_mask(name, {}, x.dim());
  check_nonempty(name, x, mask, !dim);
  return reduce(op, x, mask, keepdim, x.dtype(), {}, true).indices;
}

Tensor var_impl(const char* name, ReduceOp op, const Tensor& x, IntArrayRef dims, int64_t correction,
                bool keepdim) {
  check_floating(name, x);
  uint64_t mask = dim_mask(name, dims, x.dim());
  Tensor out = reduce(op, x, mask, keepdim, x.dtype(), {0, correction}).values;
  bool is_std = op == ReduceOp::Std;
  return record_reduction(name, x, out, mask, keepdim, is_std,
                          [mask, correction, is_std](const Tensor& g, const Tensor& x, const Tensor& out) {
                            // std = sqrt(var): d var = d std / (2 std), taken as 0 where std is 0.
                            Tensor g_var = is_std ? masked_fill(g / (out * 2), out == 0, 0) : g;
                            return var_grad(g_var, x, mask, correction);
                          });
}

// The p-norm's gradient, as PyTorch's norm_backward.
Tensor norm_grad(const Tensor& g, const Tensor& x, const Tensor& out, double p, uint64_t mask) {
  if (p == 0) return zeros_like(x);
  if (p == 1) return g * sign(x);
  if (p == 2) return g * masked_fill(x / out, out == 0, 0);
  if (std::isinf(p)) return extreme_grad(g, abs(x), out, mask) * sign(x);
  // g out^(1-p) sign(x) |x|^(p-1); the infinite factor at x = 0 (p < 1) or out = 0 (p > 1)
  // meets a zero factor: the gradient is 0 there.
  Tensor scale = masked_fill(g * pow(out, 1 - p), out == 0, 0);
  return sign(x) * masked_fill(pow(abs(x), p - 1), x == 0, 0) * scale;
}

Tensor logical(const char* name, ReduceOp op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  uint64_t mask = dim ? dim_mask(name, *dim, x.dim()) : dim_mask(name, {}, x.dim());
  return reduce(op, x, mask, keepdim, x.dtype() == kUInt8 ? kUInt8 : kBool).values;
}

}  // namespace

Tensor sum(const Tensor& x, std::optional<ScalarType> dtype) { return sum(x, {}, false, dtype); }
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("sum", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "sum", [&](const auto&... t) { return sum(t...); }, x, dims, keepdim, dtype);
  uint64_t mask = dim_mask("sum", dims, x.dim());
  Tensor out = reduce(ReduceOp::Sum, x, mask, keepdim, sum_dtype(x, dtype)).values;
  return record_reduction("sum", x, out, mask, keepdim, 1.0);
}

Tensor prod(const Tensor& x, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("prod", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "prod", [&](const auto&... t) { return prod(t...); }, x, dtype);
  return prod_impl(x, dim_mask("prod", {}, x.dim()), false, dtype);
}
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("prod", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "prod", [&](const auto&... t) { return prod(t...); }, x, dim, keepdim, dtype);
  return prod_impl(x, dim_mask("prod", dim, x.dim()), keepdim, dtype);
}

Tensor mean(const Tensor& x, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("mean", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "mean", [&](const auto&... t) { return mean(t...); }, x, dtype);
  return mean_impl(x, dim_mask("mean", {}, x.dim()), false, dtype);
}
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  detail::OpRange op_range("mean", x);
  if (amp::detail::autocast_pending && !dtype)
    return amp::autocast_call(
        "mean", [&](const auto&... t) { return mean(t...); }, x, dims, keepdim, dtype);
  return mean_impl(x, dim_mask("mean", dims, x.dim()), keepdim, dtype);
}

Tensor max(const Tensor& x) {
  detail::OpRange op_range("max", x);
  return extreme("max", ReduceOp::Max, x, {}, false);
}
Tensor min(const Tensor& x) {
  detail::OpRange op_range("min", x);
  return extreme("min", ReduceOp::Min, x, {}, false);
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::OpRange op_range("max", x);
  return extreme_dim("max", ReduceOp::Max, x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  detail::OpRange op_range("min", x);
  return extreme_dim("min", ReduceOp::Min, x, dim, keepdim);
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  detail::OpRange op_range("amax", x);
  return extreme("amax", ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  detail::OpRange op_range("amin", x);
  return extreme("amin", ReduceOp::Min, x, dims, keepdim);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  detail::OpRange op_range("argmax", x);
  return arg_extreme("argmax", ReduceOp::Max, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  detail::OpRange op_range("argmin", x);
  return arg_extreme("argmin", ReduceOp::Min, x, dim, keepdim);
}

Tensor var(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  detail::OpRange op_range("var", x);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "var", [&](const auto&... t) { return var(t...); }, x, dims, correction, keepdim);
  return var_impl("var", ReduceOp::Var, x, dims, correction, keepdim);
}
Tensor std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  detail::OpRange op_range("std", x);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "std", [&](const auto&... t) { return std(t...); }, x, dims, correction, keepdim);
  return var_impl("std", ReduceOp::Std, x, dims, correction, keepdim);
}

Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim) {
  detail::OpRange op_range("norm", x);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "norm", [&](const auto&... t) { return norm(t...); }, x, p, dims, keepdim);
  check_floating("norm", x);
  double order = p.to_double();
  EMBER_CHECK(order == order, "norm: the order p must not be NaN");
  uint64_t mask = dim_mask("norm", dims, x.dim());
  // min |x| and negative orders have no identity on an empty reduction.
  bool has_identity = order >= 0 && order != INFINITY;
  EMBER_CHECK(has_identity || !reduces_empty_dim(x, mask), "norm: cannot compute the ", order,
              " norm of an empty reduction (input of shape ", x.sizes(), "): it has no identity");
  Tensor out = reduce(ReduceOp::Norm, x, mask, keepdim, x.dtype(), {order}).values;
  return record_reduction("norm", x, out, mask, keepdim, true,
                          [order, mask](const Tensor& g, const Tensor& x, const Tensor& out) {
                            return norm_grad(g, x, out, order, mask);
                          });
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  detail::OpRange op_range("logsumexp", x);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "logsumexp", [&](const auto&... t) { return logsumexp(t...); }, x, dims, keepdim);
  uint64_t mask = dim_mask("logsumexp", dims, x.dim());
  Tensor out = reduce(ReduceOp::LogSumExp, x, mask, keepdim, to_float_dtype(x.dtype())).values;
  // The gradient is softmax(x) times the output gradient.
  return record_reduction(
      "logsumexp", x, out, mask, keepdim, true,
      [](const Tensor& g, const Tensor& x, const Tensor& out) { return g * exp(x - out); });
}

Tensor all(const Tensor& x) {
  detail::OpRange op_range("all", x);
  return logical("all", ReduceOp::All, x, std::nullopt, false);
}
Tensor any(const Tensor& x) {
  detail::OpRange op_range("any", x);
  return logical("any", ReduceOp::Any, x, std::nullopt, false);
}
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  detail::OpRange op_range("all", x);
  return logical("all", ReduceOp::All, x, dim, keepdim);
}
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  detail::OpRange op_range("any", x);
  return logical("any", ReduceOp::Any, x, dim, keepdim);
}

Tensor Tensor::sum(std::optional<ScalarType> dtype) const { return ember::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) const {
  return ember::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::prod() const { return ember::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return ember::prod(*this, dim, keepdim); }
Tensor Tensor::max() const { return ember::max(*this); }
Tensor Tensor::min() const { return ember::min(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return ember::max(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return ember::min(*this, dim, keepdim);
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const { return ember::amax(*this, dims, keepdim); }
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const { return ember::amin(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return ember::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return ember::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return ember::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return ember::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(const Scalar& p, IntArrayRef dims, bool keepdim) const {
  return ember::norm(*this, p, dims, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return ember::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::all() const { return ember::all(*this); }
Tensor Tensor::any() const { return ember::any(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return ember::all(*this, dim, keepdim); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return ember::any(*this, dim, keepdim); }

}  // namespace ember
