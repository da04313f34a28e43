// Advanced indexing as a composite: the dims the index tensors pick from move to the front and
// merge into one dim of rows, each pick's row is computed from the index tensors, and the rows are
// read with index_select or written with scatter / index_add, whose kernels, device-side checks and
// backward formulas it reuses.
#include "ember/core/ops/advanced_indexing.h"

#include <vector>

#include "ember/core/autograd_meta.h"
#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/nonzero.h"
#include "ember/core/shape.h"
#include "ember/core/tensor_index.h"

namespace ember {
namespace {

const OpRegistrar registrar({
    {"index", AutocastPolicy::None, true},
    {"index_put", AutocastPolicy::None, true},
});

bool is_mask(const Tensor& t) { return t.dtype() == kBool || t.dtype() == kUInt8; }

// The dims of the indexed tensor that an index stands for.
int64_t dims_taken(const TensorIndex& i) {
  switch (i.kind) {
    case TensorIndex::Kind::Integer:
    case TensorIndex::Kind::Slice:
      return 1;
    case TensorIndex::Kind::Tensor:
      return is_mask(i.tensor) ? i.tensor.dim() : 1;
    default:
      return 0;
  }
}

// What the index tensors pick: dims of `view` (x after the other indices), in increasing order,
// and for each the int64 positions along it, on view's device and in range.
struct Picks {
  Tensor view;
  DimVector dims;
  std::vector<Tensor> positions;
};

// Adds index tensor t, which stands at dim d of p.view; returns the dim after it.
int64_t add_index_tensor(const char* op, Picks& p, int64_t d, Tensor t) {
  Tensor& v = p.view;
  if (!is_mask(t)) {
    EMBER_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, op,
                ": tensors used as indices must be int64, int32, bool or uint8, got ", t.dtype());
    p.dims.push_back(d);
    // Checked where the indices are: a CPU index of a CUDA tensor on the CPU, before its copy.
    p.positions.push_back(detail::index_positions(op, t, d, v.size(d)).to(v.device()));
    return d + 1;
  }
  if (t.dim() == 0) v = v.unsqueeze(d), t = t.reshape({1});  // x[true] adds a dim of 1 (or 0) picks
  for (int64_t j = 0; j < t.dim(); ++j)
    EMBER_CHECK(t.size(j) == v.size(d + j), op, ": the shape of the mask ", t.sizes(), " at index ", j,
                " does not match the shape of the indexed tensor ", v.sizes(), " at index ", d + j);
  // Counted on the mask's own device (a CPU mask of a CUDA tensor on the CPU), then moved.
  const Tensor where = nonzero(t).to(v.device());
  for (int64_t j = 0; j < t.dim(); ++j) p.dims.push_back(d + j), p.positions.push_back(where.select(1, j));
  return d + t.dim();
}

Picks apply_indices(const char* op, const Tensor& x, ArrayRef<TensorIndex> indices) {
  EMBER_CHECK(x.defined(), op, ": expected a defined tensor");
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    EMBER_CHECK(i.kind != TensorIndex::Kind::Tensor || i.tensor.defined(), op,
                ": an index tensor is undefined");
    consumed += dims_taken(i);
    ellipses += i.kind == TensorIndex::Kind::Ellipsis;
  }
  EMBER_CHECK(ellipses <= 1, op, ": an index can only have a single ellipsis");
  EMBER_CHECK(consumed <= x.dim(), op, ": too many indices for tensor of dimension ", x.dim(), " (", consumed,
              " indexed)");
  Picks p{x, {}, {}};
  int64_t d = 0;
  for (const TensorIndex& i : indices) {
    switch (i.kind) {
      case TensorIndex::Kind::Integer: {
        const int64_t n = p.view.size(d);
        EMBER_CHECK(i.integer >= -n && i.integer < n, op, ": index ", i.integer,
                    " is out of bounds for dimension ", d, " with size ", n);
        p.view = p.view.select(d, i.integer);
        break;
      }
      case TensorIndex::Kind::Slice:
        EMBER_CHECK(i.slice.step > 0, op, ": slice step must be positive, got ", i.slice.step);
        p.view = p.view.slice(d, i.slice.start, i.slice.stop, i.slice.step), ++d;
        break;
      case TensorIndex::Kind::None:
        p.view = p.view.unsqueeze(d), ++d;
        break;
      case TensorIndex::Kind::Ellipsis:
        d += x.dim() - consumed;
        break;
      case TensorIndex::Kind::Tensor:
        d = add_index_tensor(op, p, d, i.tensor);
        break;
    }
  }
  return p;
}

// The permutation that moves dims [first, first + n) of an ndim-dim tensor to the front.
DimVector block_to_front(int64_t ndim, int64_t first, int64_t n) {
  DimVector perm;
  for (int64_t d = first; d < first + n; ++d) perm.push_back(d);
  for (int64_t d = 0; d < ndim; ++d)
    if (d < first || d >= first + n) perm.push_back(d);
  return perm;
}

DimVector inverse(IntArrayRef perm) {
  DimVector inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// The dims of the given lists, one after another.
DimVector concat(std::initializer_list<IntArrayRef> parts) {
  DimVector out;
  for (IntArrayRef part : parts)
    for (int64_t s : part) out.push_back(s);
  return out;
}

// How the picks lie. view.permute(perm) has the picked-from dims first; merged, they are `rows`
// rows of shape `rest`, and linear (int64 [numel(picks)]) holds each pick's row. The result has the
// picks' broadcast shape in place of those dims, from dim `front` on.
struct Layout {
  DimVector perm, picks, rest;
  int64_t front = 0, rows = 1;
  Tensor linear;

  int64_t picked() const { return numel_of(picks); }
  DimVector row_shape(int64_t n) const { return concat({IntArrayRef(n), rest}); }
  DimVector picked_shape() const { return concat({picks, rest}); }  // the result before moving picks to front
  DimVector result_shape() const {
    const IntArrayRef r(rest);
    return concat({IntArrayRef(r.data(), front), picks, IntArrayRef(r.data() + front, r.size() - front)});
  }
  // From picked_shape's order to the result's, and back.
  DimVector to_result() const {
    return inverse(block_to_front(static_cast<int64_t>(picks.size() + rest.size()), front,
                                  static_cast<int64_t>(picks.size())));
  }
  DimVector from_result() const {
    return block_to_front(static_cast<int64_t>(picks.size() + rest.size()), front,
                          static_cast<int64_t>(picks.size()));
  }
};

Layout layout_of(const char* op, const Picks& p) {
  const Tensor& v = p.view;
  Layout l;
  const int64_t k = static_cast<int64_t>(p.dims.size());
  l.front = p.dims.back() - p.dims[0] == k - 1 ? p.dims[0] : 0;
  l.picks = DimVector(p.positions[0].sizes());
  for (const Tensor& pos : p.positions) l.picks = broadcast_shapes(op, l.picks, pos.sizes());
  l.perm = p.dims;
  for (int64_t d = 0, j = 0; d < v.dim(); ++d) {
    if (j < k && p.dims[j] == d) {
      ++j;
      continue;
    }
    l.perm.push_back(d), l.rest.push_back(v.size(d));
  }
  Tensor linear;
  for (int64_t j = k - 1; j >= 0; --j) {
    const Tensor term = l.rows == 1 ? p.positions[j] : p.positions[j] * l.rows;
    linear = linear.defined() ? term + linear : term;
    l.rows *= v.size(p.dims[j]);
  }
  l.linear = linear.expand(l.picks).reshape({-1});
  return l;
}

// values, broadcast to the result's shape, as rows in the order of l.linear.
Tensor values_as_rows(const char* op, const Layout& l, const Tensor& values, const Tensor& like) {
  EMBER_CHECK(values.defined(), op, ": expected a defined values tensor");
  const DimVector shape = l.result_shape();
  bool fits = values.dim() <= static_cast<int64_t>(shape.size());
  for (int64_t i = 1; fits && i <= values.dim(); ++i) {
    const int64_t have = values.size(-i);
    fits = have == 1 || have == shape[shape.size() - i];
  }
  EMBER_CHECK(fits, op, ": shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", IntArrayRef(shape));
  Tensor v = values.to(like.dtype()).to(like.device()).expand(shape);
  return (l.front > 0 ? v.permute(l.from_result()) : v).reshape(l.row_shape(l.picked()));
}

// l.linear as scatter's index for src's rows.
Tensor scatter_index(const Layout& l, const Tensor& src) {
  DimVector index_shape(src.dim(), 1);
  index_shape[0] = l.picked();
  return l.linear.view(index_shape).expand(src.sizes());
}

// rows with src written (or added) at the rows l.linear names: out of place.
Tensor written_rows(const Layout& l, const Tensor& rows, const Tensor& src, bool accumulate) {
  return accumulate ? index_add(rows, 0, l.linear, src) : scatter(rows, 0, scatter_index(l, src), src);
}

// self[indices] = values (or += with accumulate), in place, recording nothing.
void put_in_place(const char* op, const Tensor& self, ArrayRef<TensorIndex> indices, const Tensor& values,
                  bool accumulate) {
  NoGradGuard no_grad;
  const Picks p = apply_indices(op, self, indices);
  if (p.dims.empty()) {
    accumulate ? p.view.add_(values) : p.view.copy_(values);
    return;
  }
  const Layout l = layout_of(op, p);
  const Tensor permuted = p.view.permute(l.perm), src = values_as_rows(op, l, values, self);
  const DimVector row_shape = l.row_shape(l.rows);
  if (view_strides(permuted.sizes(), permuted.strides(), row_shape)) {  // write in place
    const Tensor rows = permuted.view(row_shape);
    accumulate ? index_add_(rows, 0, l.linear, src) : scatter_(rows, 0, scatter_index(l, src), src);
  } else {
    permuted.copy_(written_rows(l, permuted.reshape(row_shape), src, accumulate).view(permuted.sizes()));
  }
}

}  // namespace

Tensor Tensor::index(ArrayRef<TensorIndex> indices) const {
  detail::OpRange op_range("index", *this);
  const char* op = "index";
  const Picks p = apply_indices(op, *this, indices);
  if (p.dims.empty()) return p.view;
  const Layout l = layout_of(op, p);
  const Tensor picked =
      p.view.permute(l.perm).reshape(l.row_shape(l.rows)).index_select(0, l.linear).view(l.picked_shape());
  return l.front > 0 ? picked.permute(l.to_result()) : picked;
}

const Tensor& Tensor::index_put_(ArrayRef<TensorIndex> indices, const Tensor& values, bool accumulate) const {
  detail::OpRange op_range("index_put_", *this, values);
  const char* op = "index_put_";
  EMBER_CHECK(defined() && values.defined(), op, ": expected defined tensors");
  // In a graph (self not a leaf that requires grad, nor a view), the writes are one recorded op.
  const bool grad = is_floating_point() && needs_grad({*this, values});
  if (grad)
    check_inplace_differentiable(op, *this);
  else
    check_inplace(op, {*this, values});
  check_no_partial_overlap(op, *this, values);
  put_in_place(op, *this, indices, values, accumulate);  // the writes move the version
  if (grad)
    record(op, {*this, values}, {*this},
           [saved = std::vector<TensorIndex>(indices.begin(), indices.end()), accumulate,
            value_sizes = DimVector(values.sizes()), value_device = values.device()](const GradContext& g) {
             const Tensor& go = g.grad();
             // The values' gradient is the picks' (summed where they were broadcast); self's is cut
             // where values replaced it.
             const Tensor gv = sum_to(go.index(saved), value_sizes).to(value_device);
             if (accumulate) return std::vector<Tensor>{go, gv};
             Tensor gs = go.clone();
             gs.index_put_(saved, 0);  // recorded under create_graph
             return std::vector<Tensor>{gs, gv};
           });
  return *this;
}

const Tensor& Tensor::index_put_(ArrayRef<TensorIndex> indices, const Scalar& value) const {
  return index_put_(indices, full({}, value, options()));
}

Tensor index_put(const Tensor& x, ArrayRef<Tensor> indices, const Tensor& values, bool accumulate) {
  detail::OpRange op_range("index_put", x, values);
  const char* op = "index_put";
  std::vector<TensorIndex> as_indices;
  for (const Tensor& t : indices) as_indices.push_back(t.defined() ? TensorIndex(t) : TensorIndex(Slice()));
  const Picks p = apply_indices(op, x, as_indices);
  EMBER_CHECK(!p.dims.empty(), op, ": expected at least one index tensor");
  const Layout l = layout_of(op, p);
  const Tensor permuted = x.permute(l.perm);
  const Tensor rows =
      written_rows(l, permuted.reshape(l.row_shape(l.rows)), values_as_rows(op, l, values, x), accumulate);
  return rows.view(permuted.sizes()).permute(inverse(l.perm)).contiguous();
}

Tensor Tensor::index_put(ArrayRef<Tensor> indices, const Tensor& values, bool accumulate) const {
  return ember::index_put(*this, indices, values, accumulate);
}

}  // namespace ember
