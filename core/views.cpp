// View ops: new sizes/strides/offset over the same storage, no data movement.
#include <algorithm>
#include <numeric>

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/memory_format.h"
#include "ember/core/op_range.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/shape.h"
#include "ember/core/tensor.h"

namespace ember {
namespace {

Tensor make_view(const Tensor& t, IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  return Tensor(IntrusivePtr<TensorImpl>::make(t.impl().storage(), t.dtype(), sizes, strides, offset));
}

// Records a view op whose input gradient is `backward(context)`.
template <class F>
Tensor record_view_node(const char* name, const Tensor& in, Tensor out, F backward) {
  if (needs_grad({in})) {
    record(name, {in}, {out},
           [backward](const GradContext& g) -> std::vector<Tensor> { return {backward(g)}; });
    out.impl().autograd_meta()->is_view = true;
  }
  return out;
}

// Records a view op whose gradient is `formula(grad)`.
template <class F>
Tensor record_view(const char* name, const Tensor& in, Tensor out, F formula) {
  return record_view_node(name, in, std::move(out),
                          [formula](const GradContext& g) { return formula(g.grad()); });
}

// A view that keeps the numel: its gradient is the output gradient reshaped back. One that also
// keeps the last dim keeps the gradient's row sums (BackwardExtras): it asks for them where the
// node before it does (a linear's bias gradient through the view before cross_entropy) and
// passes them on.
Tensor record_reshape(const char* name, const Tensor& in, Tensor out) {
  DimVector sizes(in.sizes());
  const AutogradMeta* meta = in.impl().autograd_meta();
  const bool sums_wanted = in.dim() > 0 && out.dim() > 0 && in.size(-1) == out.size(-1) && meta &&
                           meta->grad_fn && meta->grad_fn->wants_grad_row_sums(meta->output_nr);
  out = record_view_node(name, in, std::move(out), [sizes, sums_wanted](const GradContext& g) {
    if (sums_wanted && g.grad_row_sums(0).defined()) g.set_row_sums(0, g.grad_row_sums(0));
    return g.grad().reshape(sizes);
  });
  if (sums_wanted && out.grad_fn()) out.grad_fn()->want_grad_row_sums(0);
  return out;
}

// Writes g into the picked part of zeros of `sizes`: the backward of a pick, itself recorded
// (its backward is the pick again), so slicing supports double backward.
template <class Pick>
Tensor embed(const DimVector& sizes, const Pick& pick, const Tensor& g) {
  Tensor z = zeros(sizes, g.options());
  {
    NoGradGuard no_grad;
    pick(z).copy_(g);
  }
  if (needs_grad({g}))
    record("pick_backward", {g}, {z},
           [pick](const GradContext& c) -> std::vector<Tensor> { return {pick(c.grad())}; });
  return z;
}

// A view that picks some elements (slice, select): the gradient goes back into zeros.
template <class Pick>
Tensor record_pick(const char* name, const Tensor& in, Tensor out, Pick pick) {
  DimVector sizes(in.sizes());
  return record_view(name, in, std::move(out),
                     [sizes, pick](const Tensor& g) { return embed(sizes, pick, g); });
}

// The whole's gradient as a view when the parts' gradients already lie side by side in one buffer
// as the parts themselves do (cuDNN's attention writes those of q, k and v, chunks of one
// projection, into one): same storage, dtype and strides, each at its part's offset, the whole
// dense. Else undefined, and the caller concatenates.
Tensor adjacent_parts(const std::vector<Tensor>& grads, int64_t d, IntArrayRef whole) {
  const Tensor& first = grads[0];
  if (!first.defined()) return Tensor();
  int64_t offset = first.storage_offset();
  for (const Tensor& g : grads) {
    if (!g.defined() || g.impl().storage().get() != first.impl().storage().get() ||
        g.dtype() != first.dtype() || !g.strides().equals(first.strides()) || g.storage_offset() != offset)
      return Tensor();
    offset += g.size(d) * first.stride(d);
  }
  if (!is_non_overlapping_and_dense(whole, first.strides())) return Tensor();
  return make_view(first, whole, first.strides(), first.storage_offset());
}

}  // namespace

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim("size", d, dim())]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim("stride", d, dim())]; }

Tensor Tensor::as_strided(IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> offset) const {
  detail::OpRange op_range("as_strided", *this);
  EMBER_CHECK(sizes.size() == strides.size(), "as_strided: got ", sizes.size(), " sizes but ", strides.size(),
              " strides");
  int64_t off = offset.value_or(storage_offset());
  for (size_t d = 0; d < sizes.size(); ++d)
    EMBER_CHECK(sizes[d] >= 0 && strides[d] >= 0, "as_strided: negative size or stride in sizes ", sizes,
                ", strides ", strides);
  checked_numel("as_strided", sizes);
  const int64_t span = checked_span("as_strided", sizes, strides);
  const int64_t storage_elements = static_cast<int64_t>(impl().storage()->nbytes() / element_size());
  EMBER_CHECK(off >= 0 && (span == 0 || (off <= storage_elements && span <= storage_elements - off)),
              "as_strided: sizes ", sizes, " and strides ", strides, " at offset ", off,
              " reach outside a storage of ", impl().storage()->nbytes() / element_size(), " elements");
  EMBER_CHECK(!needs_grad({*this}), "as_strided: backward is not implemented; detach() the input first");
  return make_view(*this, sizes, strides, off);
}

Tensor Tensor::view(IntArrayRef sizes) const {
  detail::OpRange op_range("view", *this);
  DimVector shape = infer_size("view", sizes, numel());
  auto st = view_strides(this->sizes(), strides(), shape);
  EMBER_CHECK(st.has_value(), "view: size ", sizes, " is not compatible with input of size ", this->sizes(),
              " and strides ", strides(),
              " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  return record_reshape("view", *this, make_view(*this, shape, *st, storage_offset()));
}

Tensor Tensor::reshape(IntArrayRef sizes) const {
  detail::OpRange op_range("reshape", *this);
  DimVector shape = infer_size("reshape", sizes, numel());
  if (auto st = view_strides(this->sizes(), strides(), shape))
    return record_reshape("reshape", *this, make_view(*this, shape, *st, storage_offset()));
  return contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  detail::OpRange op_range("transpose", *this);
  int64_t n = dim();
  d0 = wrap_dim("transpose", d0, n);
  d1 = wrap_dim("transpose", d1, n);
  if (n == 0)
    return record_reshape("transpose", *this, make_view(*this, sizes(), strides(), storage_offset()));
  DimVector sz(sizes()), st(strides());
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return record_view("transpose", *this, make_view(*this, sz, st, storage_offset()),
                     [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor Tensor::permute(IntArrayRef dims) const {
  detail::OpRange op_range("permute", *this);
  int64_t n = dim();
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: number of dims don't match, tensor has ", n,
              " dims but got dims ", dims);
  DimVector sz(n), st(n), inverse(n);
  uint64_t seen = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim("permute", dims[i], n);
    EMBER_CHECK(!(seen >> d & 1), "permute: repeated dim in ", dims);
    seen |= 1ull << d;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  return record_view("permute", *this, make_view(*this, sz, st, storage_offset()),
                     [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::t() const {
  detail::OpRange op_range("t", *this);
  EMBER_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got ", dim(), "D of shape ",
              sizes());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  detail::OpRange op_range("narrow", *this);
  EMBER_CHECK(dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  d = wrap_dim("narrow", d, dim());
  int64_t n = sizes()[d];
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && length <= n - start, "narrow: start ", start, " + length ", length,
              " exceeds dimension ", d, " of size ", n, " (shape ", sizes(), ")");
  return slice(d, start, start + length);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  detail::OpRange op_range("slice", *this);
  EMBER_CHECK(dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  d = wrap_dim("slice", d, dim());
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = sizes()[d];
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  DimVector sz(sizes()), st(strides());
  sz[d] = (e - s + step - 1) / step;
  st[d] *= step;
  return record_pick("slice", *this, make_view(*this, sz, st, storage_offset() + s * strides()[d]),
                     [d, s, e, step](const Tensor& z) { return z.slice(d, s, e, step); });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  detail::OpRange op_range("select", *this);
  EMBER_CHECK(dim() > 0, "select: cannot be applied to a 0-dim tensor");
  d = wrap_dim("select", d, dim());
  int64_t n = sizes()[d];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for tensor of size ", sizes(),
              " at dimension ", d);
  if (index < 0) index += n;
  DimVector sz(sizes()), st(strides());
  sz.erase(d);
  st.erase(d);
  return record_pick("select", *this, make_view(*this, sz, st, storage_offset() + index * strides()[d]),
                     [d, index](const Tensor& z) { return z.select(d, index); });
}

Tensor Tensor::expand(IntArrayRef sizes) const {
  detail::OpRange op_range("expand", *this);
  int64_t n = static_cast<int64_t>(sizes.size());
  EMBER_CHECK(n >= dim(), "expand: the number of sizes provided (", n,
              ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  DimVector sz(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - dim());
    int64_t have = j >= 0 ? this->sizes()[j] : 1;
    int64_t want = sizes[i];
    if (want == -1) {
      EMBER_CHECK(j >= 0, "expand: -1 is not allowed in a leading, non-existing dimension ", i);
      want = have;
    }
    EMBER_CHECK(want >= 0 && (have == want || have == 1), "expand: the expanded size of the tensor (", want,
                ") must match the existing size (", have, ") at non-singleton dimension ", i,
                ". Target sizes: ", sizes, ". Tensor sizes: ", this->sizes());
    sz[i] = want;
    st[i] = j >= 0 && have == want ? strides()[j] : 0;
  }
  checked_numel("expand", sz);
  DimVector from(this->sizes());
  return record_view("expand", *this, make_view(*this, sz, st, storage_offset()),
                     [from](const Tensor& g) { return sum_to(g, from); });
}

Tensor Tensor::squeeze() const {
  detail::OpRange op_range("squeeze", *this);
  DimVector sz, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (sizes()[d] != 1) sz.push_back(sizes()[d]), st.push_back(strides()[d]);
  return record_reshape("squeeze", *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::squeeze(int64_t d) const {
  detail::OpRange op_range("squeeze", *this);
  d = wrap_dim("squeeze", d, dim());
  if (dim() == 0 || sizes()[d] != 1)
    return record_reshape("squeeze", *this, make_view(*this, sizes(), strides(), storage_offset()));
  DimVector sz(sizes()), st(strides());
  sz.erase(d);
  st.erase(d);
  return record_reshape("squeeze", *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  detail::OpRange op_range("unsqueeze", *this);
  d = wrap_dim("unsqueeze", d, dim() + 1);
  DimVector sz(sizes()), st(strides());
  int64_t s = d < dim() ? sizes()[d] * strides()[d] : 1;
  sz.insert(d, 1);
  st.insert(d, s);
  return record_reshape("unsqueeze", *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  detail::OpRange op_range("flatten", *this);
  if (dim() == 0) return reshape({1});
  start = wrap_dim("flatten", start, dim());
  end = wrap_dim("flatten", end, dim());
  EMBER_CHECK(start <= end, "flatten: start_dim (", start, ") cannot come after end_dim (", end, ")");
  DimVector shape;
  for (int64_t d = 0; d < start; ++d) shape.push_back(sizes()[d]);
  int64_t m = 1;
  for (int64_t d = start; d <= end; ++d) m *= sizes()[d];
  shape.push_back(m);
  for (int64_t d = end + 1; d < dim(); ++d) shape.push_back(sizes()[d]);
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t d, IntArrayRef sizes) const {
  detail::OpRange op_range("unflatten", *this);
  EMBER_CHECK(dim() > 0, "unflatten: cannot be applied to a 0-dim tensor");
  d = wrap_dim("unflatten", d, dim());
  EMBER_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  DimVector inner = infer_size("unflatten", sizes, this->sizes()[d]);
  DimVector shape;
  for (int64_t i = 0; i < d; ++i) shape.push_back(this->sizes()[i]);
  for (int64_t s : inner) shape.push_back(s);
  for (int64_t i = d + 1; i < dim(); ++i) shape.push_back(this->sizes()[i]);
  return view(shape);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  detail::OpRange op_range("split", *this);
  EMBER_CHECK(dim() > 0, "split: cannot be applied to a 0-dim tensor");
  d = wrap_dim("split", d, dim());
  int64_t n = sizes()[d];
  EMBER_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ",
              split_size);
  if (n == 0) return {*this};
  DimVector sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  return split(sizes, d);
}

std::vector<Tensor> Tensor::split(IntArrayRef split_sizes, int64_t d) const {
  detail::OpRange op_range("split", *this);
  EMBER_CHECK(dim() > 0, "split: cannot be applied to a 0-dim tensor");
  d = wrap_dim("split", d, dim());
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    EMBER_CHECK(s >= 0, "split: split sizes must be non-negative, got ", split_sizes);
    total += s;
  }
  EMBER_CHECK(total == sizes()[d], "split: split sizes ", split_sizes, " must sum to the size ", sizes()[d],
              " of dimension ", d);
  // The parts are views without history of their own; one node for all of them concatenates
  // their gradients in one pass (a narrow each would write its gradient into zeros of the whole,
  // and the engine would sum those).
  std::vector<Tensor> out;
  int64_t start = 0;
  {
    NoGradGuard no_grad;
    for (int64_t s : split_sizes) out.push_back(narrow(d, start, s)), start += s;
  }
  if (needs_grad({*this})) {
    const size_t parts = out.size();
    DimVector whole(sizes());
    record("split", {*this}, out, [d, parts, whole](const GradContext& g) -> std::vector<Tensor> {
      std::vector<Tensor> grads;
      for (size_t i = 0; i < parts; ++i) grads.push_back(g.grad(i));
      if (Tensor view = adjacent_parts(grads, d, whole); view.defined() && !GradMode::is_enabled())
        return {view};
      return {cat(grads, d)};
    });
    for (const Tensor& t : out) t.impl().autograd_meta()->is_view = true;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  detail::OpRange op_range("chunk", *this);
  EMBER_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  EMBER_CHECK(dim() > 0, "chunk: cannot be applied to a 0-dim tensor");
  int64_t n = sizes()[wrap_dim("chunk", d, dim())];
  return split(std::max<int64_t>((n + chunks - 1) / chunks, 1), d);
}

std::vector<Tensor> Tensor::unbind(int64_t d) const {
  detail::OpRange op_range("unbind", *this);
  EMBER_CHECK(dim() > 0, "unbind: cannot be applied to a 0-dim tensor");
  d = wrap_dim("unbind", d, dim());
  std::vector<Tensor> out;
  for (int64_t i = 0; i < sizes()[d]; ++i) out.push_back(select(d, i));
  return out;
}

}  // namespace ember
