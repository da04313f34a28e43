// Frontends of the indexing ops: dtype, device and shape checks, a range check of every index
// value, then the gather or scatter kernel. index_select, take_along_dim and index_add reach
// those kernels through index views that broadcast along the other dims. The backward formulas
// pair the ops up (gather <-> scatter_add, index_select <-> index_add), so each can be
// differentiated again.
#include "ember/core/ops/indexing.h"

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<GatherFn> gather_stub("gather");
constinit DispatchStub<ScatterFn> scatter_stub("scatter");
constinit DispatchStub<IndexRangeFn> index_range_stub("index_range");

namespace {

constexpr auto PROMOTE = AutocastPolicy::Promote;
constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({
    {"index_select", NONE, true},
    {"gather", NONE, true},
    {"scatter", NONE, true},
    {"scatter_add", PROMOTE, true},
    {"index_add", PROMOTE, true},
    {"take_along_dim", NONE, true},
    {"one_hot", NONE, false},
});

// A 0-dim tensor takes part as a 1-element 1-D one (atleast_1d), as in PyTorch.
int64_t size_or_1(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }

void check_device(const char* op, const Tensor& self, const Tensor& t, const char* name) {
  EMBER_CHECK(t.device() == self.device(), op, ": expected ", name, " on the device of self (", self.device(),
              "), got ", t.device());
}

void check_index_dtype(const char* op, const Tensor& index, bool int32_ok) {
  EMBER_CHECK(index.dtype() == kInt64 || (int32_ok && index.dtype() == kInt32), op, ": expected dtype int64",
              int32_ok ? " or int32" : "", " for index, got ", index.dtype());
}

// On the CPU; CUDA kernels check as they read (indexing.h's kernel families).
void check_index_range(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  if (index.numel() == 0 || !index.is_cpu()) return;
  IndexRange r = index_range_stub(index.device())(op, index);
  EMBER_CHECK(r.min >= 0 && r.max < size, op, ": index ", r.min < 0 ? r.min : r.max,
              " is out of bounds for dimension ", dim, " with size ", size);
}

// gather's and scatter's rule: index has self's number of dims and is no larger than self apart
// from dim, and no larger than src (when given) anywhere.
void check_index_shape(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                       const Tensor* src) {
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  EMBER_CHECK(std::max<int64_t>(index.dim(), 1) == nd, op,
              ": index tensor must have the same number of dimensions as self tensor, got index ",
              index.sizes(), " and self ", self.sizes());
  EMBER_CHECK(!src || std::max<int64_t>(src->dim(), 1) == nd, op,
              ": index tensor must have the same number of dimensions as src tensor, got index ",
              index.sizes(), " and src ", src->sizes());
  for (int64_t d = 0; d < nd; ++d) {
    EMBER_CHECK(d == dim || size_or_1(index, d) <= size_or_1(self, d), op,
                ": size does not match at dimension ", d, ", expected index ", index.sizes(),
                " to be no larger than self ", self.sizes(), " apart from dimension ", dim);
    EMBER_CHECK(!src || size_or_1(index, d) <= size_or_1(*src, d), op, ": size does not match at dimension ",
                d, ", expected index ", index.sizes(), " to be no larger than src ", src->sizes());
  }
}

Tensor gather_checked(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(op, index, false);
  check_device(op, x, index, "index");
  dim = wrap_dim(op, dim, x.dim());
  check_index_shape(op, x, dim, index, nullptr);
  check_index_range(op, index, dim, size_or_1(x, dim));
  Tensor out = empty(index.sizes(), x.options());
  if (out.numel() > 0) {
    NoGradGuard no_grad;  // atleast_1d's view of x is not part of the graph
    gather_stub(x.device())(op, atleast_1d(out), atleast_1d(x), dim, atleast_1d(index));
  }
  if (needs_grad({x}))  // the gradient adds up where x was read
    record(op, {x}, {out},
           [si = SavedTensor(index, false), sizes = DimVector(x.sizes()), dim](const GradContext& g) {
             return std::vector<Tensor>{scatter_add(zeros(sizes, g.grad().options()), dim, g(si), g.grad())};
           });
  return out;
}

// The gradient of scatter's src: the gradient gathered where src was written, zero for the
// elements of src beyond index's sizes (which were not read).
Tensor scatter_src_backward(const Tensor& grad, int64_t dim, const Tensor& index, IntArrayRef src_sizes) {
  Tensor r = gather(grad, dim, index);
  if (r.dim() == 0) r = r.reshape({1});
  DimVector pads;
  bool padded = false;
  for (int64_t d = r.dim() - 1; d >= 0; --d) {
    pads.push_back(0);
    pads.push_back((src_sizes.empty() ? 1 : src_sizes[d]) - r.size(d));
    padded = padded || pads.back() != 0;
  }
  return (padded ? pad(r, pads) : r).reshape(src_sizes);
}

// The in-place scatter once the shapes are checked (and on the CPU the index values).
const Tensor& run_scatter(const char* op, ScatterOp sop, const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& src, const Scalar& alpha) {
  if (index.numel() > 0)
    scatter_stub(self.device())(op, sop, atleast_1d(self), dim, atleast_1d(index), atleast_1d(src), alpha);
  self.bump_version();
  return self;
}

// Writes into self in place: callers check autograd's rules (check_inplace, or a fresh clone).
const Tensor& scatter_checked(const char* op, ScatterOp sop, const Tensor& self, int64_t dim,
                              const Tensor& index, const Tensor& src) {
  check_index_dtype(op, index, false);
  check_device(op, self, index, "index");
  check_device(op, self, src, "src");
  EMBER_CHECK(self.dtype() == src.dtype(), op, ": expected self.dtype to be equal to src.dtype, got ",
              self.dtype(), " and ", src.dtype());
  dim = wrap_dim(op, dim, self.dim());
  check_index_shape(op, self, dim, index, &src);
  check_no_internal_overlap(op, self);
  check_index_range(op, index, dim, size_or_1(self, dim));
  return run_scatter(op, sop, self, dim, index, src, 1);
}

// `value` as a src of index's shape.
Tensor value_src(const Tensor& self, const Tensor& index, const Scalar& value) {
  return full({}, value, self.options()).expand(index.sizes());
}

const Tensor& index_add_checked(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                                const Tensor& source, const Scalar& alpha) {
  check_index_dtype(op, index, true);
  check_device(op, self, index, "index");
  check_device(op, self, source, "source");
  EMBER_CHECK(index.dim() <= 1, op, ": index is supposed to be a vector, got shape ", index.sizes());
  EMBER_CHECK(self.dtype() == source.dtype(), op, ": self (", self.dtype(), ") and source (", source.dtype(),
              ") must have the same scalar type");
  EMBER_CHECK(self.is_floating_point() || !alpha.is_floating_point(), op,
              ": for integral input tensors, argument alpha must not be a floating point number");
  dim = wrap_dim(op, dim, self.dim());
  Tensor idx = atleast_1d(index.to(kInt64));
  const int64_t n = idx.numel();
  bool same_shape = std::max<int64_t>(source.dim(), 1) == std::max<int64_t>(self.dim(), 1);
  for (int64_t d = 0; same_shape && d < std::max<int64_t>(self.dim(), 1); ++d)
    same_shape = size_or_1(source, d) == (d == dim ? n : size_or_1(self, d));
  EMBER_CHECK(same_shape, op, ": source ", source.sizes(), " should have the shape of self ", self.sizes(),
              " except at dimension ", dim, ", where it must have size ", n, " (the number of indices)");
  check_no_internal_overlap(op, self);
  check_index_range(op, idx, dim, size_or_1(self, dim));
  // The index seen at every element of source: idx along dim, broadcast elsewhere.
  Tensor src = atleast_1d(source);
  DimVector strides(src.dim(), 0);
  strides[dim] = idx.stride(0);
  return run_scatter(op, ScatterOp::Add, self, dim, idx.as_strided(src.sizes(), strides), src, alpha);
}

// An out-of-place form: the in-place `op` on a copy of x, with grad mode off (the caller records).
template <class Op>
Tensor on_copy(const Tensor& x, Op op) {
  NoGradGuard no_grad;
  return op(x.clone());
}

// Records scatter (`assign`) or scatter_add of src (undefined for a scalar value) into x. x's
// gradient is the output's, without the positions scatter overwrote; src's is gathered.
void record_scatter(const char* op, bool assign, const Tensor& out, const Tensor& x, int64_t dim,
                    const Tensor& index, const Tensor& src) {
  if (!needs_grad({x, src})) return;
  dim = wrap_dim(op, dim, x.dim());
  DimVector src_sizes = src.defined() ? DimVector(src.sizes()) : DimVector();
  record(
      op, {x, src}, {out},
      [assign, dim, si = SavedTensor(index, false), src_sizes](const GradContext& g) -> std::vector<Tensor> {
        Tensor index = g(si), gx, gsrc;
        if (g.needs(0)) gx = assign ? scatter(g.grad(), dim, index, Scalar(0)) : g.grad();
        if (g.needs(1)) gsrc = scatter_src_backward(g.grad(), dim, index, src_sizes);
        return {gx, gsrc};
      });
}

}  // namespace

namespace detail {

Tensor index_positions(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  check_index_dtype(op, index, true);
  const Tensor idx = index.to(kInt64);
  if (idx.is_cpu() && idx.numel() > 0) {
    const IndexRange r = index_range_stub(idx.device())(op, idx);
    EMBER_CHECK(r.min >= -size && r.max < size, op, ": index ", r.min < -size ? r.min : r.max,
                " is out of bounds for dimension ", dim, " with size ", size);
  }
  // Below -size stays as it is, so that the GPU's check below names the index as given.
  const Tensor wrapped = where((idx < 0) && (idx >= -size), idx + size, idx);
  if (idx.is_cpu()) return wrapped;
  // On the GPU the gather's own check, with no wait: each position read from a table of them
  // shaped so that a bad one is reported at `dim`.
  DimVector table_shape(dim + 1, 1), index_shape(dim + 1, 1);
  table_shape[dim] = size, index_shape[dim] = idx.numel();
  const Tensor table = arange(size, TensorOptions(kInt64).device(idx.device())).view(table_shape);
  return gather_checked(op, table, dim, wrapped.reshape(index_shape)).view(idx.sizes());
}

}  // namespace detail

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::OpRange op_range("gather", x, index);
  return gather_checked("gather", x, dim, index);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::OpRange op_range("index_select", x, index);
  const char* op = "index_select";
  check_index_dtype(op, index, true);
  check_device(op, x, index, "index");
  EMBER_CHECK(index.dim() <= 1, op, ": index is supposed to be a vector, got shape ", index.sizes());
  dim = wrap_dim(op, dim, x.dim());
  Tensor idx = atleast_1d(index.to(kInt64));
  check_index_range(op, idx, dim, size_or_1(x, dim));
  EMBER_CHECK(x.dim() > 0 || idx.numel() == 1, op, ": index of a 0-dim tensor can have only 1 value, got ",
              idx.numel());
  Tensor out;
  if (x.dim() == 0) {
    NoGradGuard no_grad;  // recorded below
    out = x.clone();
  } else {
    DimVector shape(x.sizes());
    shape[dim] = idx.numel();
    out = empty(shape, x.options());
    DimVector strides(shape.size(), 0);
    strides[dim] = idx.stride(0);
    NoGradGuard no_grad;  // the kernel's views of x are not part of the graph
    if (out.numel() > 0) gather_stub(x.device())(op, out, x, dim, idx.as_strided(shape, strides));
  }
  if (needs_grad({x}))
    record(op, {x}, {out},
           [si = SavedTensor(index, false), sizes = DimVector(x.sizes()), dim](const GradContext& g) {
             return std::vector<Tensor>{index_add(zeros(sizes, g.grad().options()), dim, g(si), g.grad())};
           });
  return out;
}

// The gradient reaches x through the broadcast views (expand sums it back).
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  detail::OpRange op_range("take_along_dim", x, indices);
  const char* op = "take_along_dim";
  EMBER_CHECK(indices.dtype() == kInt64, op, ": dtype of indices should be int64, got ", indices.dtype());
  if (!dim) return gather_checked(op, x.reshape({-1}), 0, indices.reshape({-1}));
  EMBER_CHECK(x.dim() == indices.dim(), op,
              ": input and indices should have the same number of dimensions, got ", x.sizes(), " and ",
              indices.sizes());
  if (x.dim() == 0) return gather_checked(op, x, *dim, indices);
  int64_t d = wrap_dim(op, *dim, x.dim());
  // Broadcast all dims but d: x keeps its size along d, indices theirs.
  DimVector x_sizes(x.sizes()), index_sizes(indices.sizes());
  x_sizes[d] = indices.size(d);
  index_sizes[d] = x.size(d);
  Tensor index_b = indices.expand(broadcast_shapes(op, x_sizes, indices.sizes()));
  Tensor x_b = x.expand(broadcast_shapes(op, index_sizes, x.sizes()));
  return gather_checked(op, x_b, d, index_b);
}

const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::OpRange op_range("scatter_", self, index, src);
  check_inplace("scatter_", {self, src});
  return scatter_checked("scatter_", ScatterOp::Assign, self, dim, index, src);
}
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  detail::OpRange op_range("scatter_", self, index);
  check_inplace("scatter_", {self});
  return scatter_checked("scatter_", ScatterOp::Assign, self, dim, index, value_src(self, index, value));
}
const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::OpRange op_range("scatter_add_", self, index, src);
  check_inplace("scatter_add_", {self, src});
  return scatter_checked("scatter_add_", ScatterOp::Add, self, dim, index, src);
}
const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha) {
  detail::OpRange op_range("index_add_", self, index, source);
  check_inplace("index_add_", {self, source});
  return index_add_checked("index_add_", self, dim, index, source, alpha);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::OpRange op_range("scatter", x, index, src);
  Tensor out = on_copy(x, [&](const Tensor& self) {
    return scatter_checked("scatter", ScatterOp::Assign, self, dim, index, src);
  });
  record_scatter("scatter", true, out, x, dim, index, src);
  return out;
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  detail::OpRange op_range("scatter", x, index);
  Tensor out = on_copy(x, [&](const Tensor& self) {
    return scatter_checked("scatter", ScatterOp::Assign, self, dim, index, value_src(x, index, value));
  });
  record_scatter("scatter", true, out, x, dim, index, Tensor());
  return out;
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::OpRange op_range("scatter_add", x, index, src);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "scatter_add", [&](const auto&... t) { return scatter_add(t...); }, x, dim, index, src);
  Tensor out = on_copy(x, [&](const Tensor& self) {
    return scatter_checked("scatter_add", ScatterOp::Add, self, dim, index, src);
  });
  record_scatter("scatter_add", false, out, x, dim, index, src);
  return out;
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  detail::OpRange op_range("index_add", x, index, source);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "index_add", [&](const auto&... t) { return index_add(t...); }, x, dim, index, source, alpha);
  Tensor out = on_copy(
      x, [&](const Tensor& self) { return index_add_checked("index_add", self, dim, index, source, alpha); });
  if (needs_grad({x, source})) {
    dim = wrap_dim("index_add", dim, x.dim());
    record("index_add", {x, source}, {out},
           [dim, alpha, si = SavedTensor(index, false),
            source_sizes = DimVector(source.sizes())](const GradContext& g) -> std::vector<Tensor> {
             Tensor gsource;
             if (g.needs(1)) {
               gsource = index_select(g.grad(), dim, g(si)).reshape(source_sizes);
               if (alpha.to_double() != 1) gsource = gsource * alpha;
             }
             return {g.needs(0) ? g.grad() : Tensor(), gsource};
           });
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  detail::OpRange op_range("one_hot", indices);
  const char* op = "one_hot";
  EMBER_CHECK(indices.dtype() == kInt64, op, ": expected an int64 index tensor, got ", indices.dtype());
  EMBER_CHECK(num_classes >= -1, op, ": num_classes must be -1 or non-negative, got ", num_classes);
  EMBER_CHECK(num_classes >= 0 || indices.numel() > 0, op,
              ": can not infer the number of classes from an empty tensor");
  // Inferring num_classes reads the values back; on CUDA a given one leaves the check to the kernel.
  if (indices.numel() > 0 && (num_classes < 0 || indices.is_cpu())) {
    IndexRange r = index_range_stub(indices.device())(op, indices);
    EMBER_CHECK(r.min >= 0, op, ": class values must be non-negative, got ", r.min);
    if (num_classes < 0) num_classes = r.max + 1;
    EMBER_CHECK(r.max < num_classes, op, ": class values must be smaller than num_classes (", num_classes,
                "), got ", r.max);
  }
  DimVector shape(indices.sizes());
  shape.push_back(num_classes);
  Tensor out = zeros(shape, TensorOptions(kInt64).device(indices.device()));
  if (out.numel() == 0) return out;
  Tensor index = indices.unsqueeze(-1);
  run_scatter(op, ScatterOp::Assign, out, out.dim() - 1, index, value_src(out, index, 1), 1);
  return out;
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return ember::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ember::gather(*this, dim, index); }

}  // namespace ember
