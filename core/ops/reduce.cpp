// Frontends of the reductions: dims, output dtype and shape, empty-input rules, then the
// device's kernel.
#include "ember/core/ops/reduce.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/op_registry.h"
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

// The gradient of a sum over `mask` (times `scale`): the output gradient broadcast back over
// the reduced dims.
Tensor record_reduction(const char* name, const Tensor& x, Tensor out, uint64_t mask, bool keepdim,
                        double scale) {
  if (!needs_grad({x})) return out;
  DimVector sizes(x.sizes());
  record(name, {x}, {out}, [sizes, mask, keepdim, scale](const GradContext& g) -> std::vector<Tensor> {
    Tensor grad = g.grad();
    if (!keepdim)
      for (size_t d = 0; d < sizes.size(); ++d)
        if (mask >> d & 1) grad = grad.unsqueeze(static_cast<int64_t>(d));
    grad = grad.expand(sizes);
    return {scale == 1.0 ? grad : grad * scale};
  });
  return out;
}

ScalarType sum_dtype(const Tensor& x, std::optional<ScalarType> dtype) {
  return dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
}

Tensor mean_impl(const Tensor& x, uint64_t mask, bool keepdim, std::optional<ScalarType> dtype) {
  EMBER_CHECK(dtype || x.is_floating_point(), "mean: could not infer output dtype. Input dtype ",
              "must be a floating point dtype, got ", x.dtype(), " (pass a floating dtype)");
  ScalarType out = dtype.value_or(x.dtype());
  EMBER_CHECK(is_floating_point(out), "mean: dtype must be a floating point dtype, got ", out);
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask >> d & 1) count *= x.size(d);
  return record_reduction("mean", x, reduce(ReduceOp::Mean, x, mask, keepdim, out).values, mask, keepdim,
                          count > 0 ? 1.0 / static_cast<double>(count) : 0.0);
}

Tensor extreme(const char* name, ReduceOp op, const Tensor& x, IntArrayRef dims, bool keepdim) {
  uint64_t mask = dim_mask(name, dims, x.dim());
  check_nonempty(name, x, mask, dims.empty());
  return reduce(op, x, mask, keepdim, x.dtype()).values;
}

std::tuple<Tensor, Tensor> extreme_dim(const char* name, ReduceOp op, const Tensor& x, int64_t dim,
                                       bool keepdim) {
  uint64_t mask = dim_mask(name, dim, x.dim());
  check_nonempty(name, x, mask, false);
  Reduction r = reduce(op, x, mask, keepdim, x.dtype(), {}, true);
  return {r.values, r.indices};
}

Tensor arg_extreme(const char* name, ReduceOp op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return std::get<1>(extreme_dim(name, op, x, *dim, keepdim));
  // Over all dims, the index being the flat (row-major) one.
  check_nonempty(name, x, 0, true);
  return reduce(op, x, dim_mask(name, {}, x.dim()), keepdim, x.dtype(), {}, true).indices;
}

Tensor var_impl(const char* name, ReduceOp op, const Tensor& x, IntArrayRef dims, int64_t correction,
                bool keepdim) {
  check_floating(name, x);
  uint64_t mask = dim_mask(name, dims, x.dim());
  return reduce(op, x, mask, keepdim, x.dtype(), {0, correction}).values;
}

Tensor logical(const char* name, ReduceOp op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  uint64_t mask = dim ? dim_mask(name, *dim, x.dim()) : dim_mask(name, {}, x.dim());
  return reduce(op, x, mask, keepdim, x.dtype() == kUInt8 ? kUInt8 : kBool).values;
}

}  // namespace

Tensor sum(const Tensor& x, std::optional<ScalarType> dtype) { return sum(x, {}, false, dtype); }
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  uint64_t mask = dim_mask("sum", dims, x.dim());
  Tensor out = reduce(ReduceOp::Sum, x, mask, keepdim, sum_dtype(x, dtype)).values;
  return record_reduction("sum", x, out, mask, keepdim, 1.0);
}

Tensor prod(const Tensor& x, std::optional<ScalarType> dtype) {
  uint64_t mask = dim_mask("prod", {}, x.dim());
  return reduce(ReduceOp::Prod, x, mask, false, sum_dtype(x, dtype)).values;
}
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  uint64_t mask = dim_mask("prod", dim, x.dim());
  return reduce(ReduceOp::Prod, x, mask, keepdim, sum_dtype(x, dtype)).values;
}

Tensor mean(const Tensor& x, std::optional<ScalarType> dtype) {
  return mean_impl(x, dim_mask("mean", {}, x.dim()), false, dtype);
}
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<ScalarType> dtype) {
  return mean_impl(x, dim_mask("mean", dims, x.dim()), keepdim, dtype);
}

Tensor max(const Tensor& x) { return extreme("max", ReduceOp::Max, x, {}, false); }
Tensor min(const Tensor& x) { return extreme("min", ReduceOp::Min, x, {}, false); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim("max", ReduceOp::Max, x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim("min", ReduceOp::Min, x, dim, keepdim);
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme("amax", ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme("amin", ReduceOp::Min, x, dims, keepdim);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmax", ReduceOp::Max, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmin", ReduceOp::Min, x, dim, keepdim);
}

Tensor var(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  return var_impl("var", ReduceOp::Var, x, dims, correction, keepdim);
}
Tensor std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  return var_impl("std", ReduceOp::Std, x, dims, correction, keepdim);
}

Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim) {
  check_floating("norm", x);
  double order = p.to_double();
  EMBER_CHECK(order == order, "norm: the order p must not be NaN");
  uint64_t mask = dim_mask("norm", dims, x.dim());
  // min |x| and negative orders have no identity on an empty reduction.
  bool has_identity = order >= 0 && order != INFINITY;
  EMBER_CHECK(has_identity || !reduces_empty_dim(x, mask), "norm: cannot compute the ", order,
              " norm of an empty reduction (input of shape ", x.sizes(), "): it has no identity");
  return reduce(ReduceOp::Norm, x, mask, keepdim, x.dtype(), {order}).values;
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  uint64_t mask = dim_mask("logsumexp", dims, x.dim());
  return reduce(ReduceOp::LogSumExp, x, mask, keepdim, to_float_dtype(x.dtype())).values;
}

Tensor all(const Tensor& x) { return logical("all", ReduceOp::All, x, std::nullopt, false); }
Tensor any(const Tensor& x) { return logical("any", ReduceOp::Any, x, std::nullopt, false); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return logical("all", ReduceOp::All, x, dim, keepdim);
}
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
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
