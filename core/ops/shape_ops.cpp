// Frontends of the shape ops: cat and stack copy slices into place; flip, roll, pad and repeat
// describe each output dim by the input index it reads and run one remap pass. Their backward
// formulas are written with ember ops (flip, roll, pad, sum, index_add, tril/triu), so they can
// be differentiated again.
#include "ember/core/ops/shape_ops.h"

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<RemapFn> remap_stub("remap");
constinit DispatchStub<TriFn> tri_stub("tri");

namespace {

constexpr auto PROMOTE = AutocastPolicy::Promote;
constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({
    {"cat", PROMOTE, true},
    {"stack", PROMOTE, true},
    {"flip", NONE, true},
    {"roll", NONE, true},
    {"pad", NONE, true},
    {"repeat", NONE, true},
    {"tril", NONE, true},
    {"triu", NONE, true},
});

// For each dim of x, the input index each output index reads (kRemapFill: the fill value).
using IndexMaps = std::vector<std::vector<int64_t>>;

IndexMaps identity_maps(const Tensor& x) {
  IndexMaps maps(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    for (int64_t i = 0; i < x.size(d); ++i) maps[d].push_back(i);
  return maps;
}

Tensor remap(const Tensor& x, const IndexMaps& maps, const Scalar& fill = 0) {
  if (x.dim() == 0) return x.clone();
  DimVector sizes;
  int64_t total = 0;
  for (const auto& m : maps) {
    sizes.push_back(static_cast<int64_t>(m.size()));
    total += sizes.back();
  }
  Tensor offsets = empty({total}, kInt64);
  int64_t* p = offsets.data_ptr<int64_t>();
  for (int64_t d = 0; d < x.dim(); ++d)
    for (int64_t i : maps[d]) *p++ = i == kRemapFill ? kRemapFill : i * x.stride(d);
  Tensor out = empty(sizes, x.options());
  if (out.numel() > 0) remap_stub(x.device())(out, x, offsets.to(x.device()), fill);
  return out;
}

bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

// Runs `forward` with grad mode off (its internal views and copies are not part of the graph),
// then records op `name` on x, whose gradient is `backward` of the output's.
template <class Forward, class Backward>
Tensor shape_op(const char* name, const Tensor& x, Forward forward, Backward backward) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = forward();
  }
  if (needs_grad({x}))
    record(name, {x}, {out},
           [backward](const GradContext& g) -> std::vector<Tensor> { return {backward(g.grad())}; });
  return out;
}

Tensor tri(const char* name, const Tensor& x, int64_t diagonal, bool upper) {
  EMBER_CHECK(x.dim() >= 2, name, ": input tensor must have at least 2 dimensions, got shape ", x.sizes());
  diagonal = std::clamp(diagonal, -x.size(-2), x.size(-1));  // beyond these all or nothing is kept
  auto forward = [&] {
    Tensor out = empty(x.sizes(), x.options());
    if (out.numel() > 0) tri_stub(x.device())(out, x, diagonal, upper);
    return out;
  };
  return shape_op(name, x, forward,
                  [diagonal, upper](const Tensor& g) { return upper ? g.triu(diagonal) : g.tril(diagonal); });
}

Tensor roll_impl(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  EMBER_CHECK(!shifts.empty(), "roll: shifts must not be empty");
  if (dims.empty()) {
    EMBER_CHECK(shifts.size() == 1, "roll: shifts and dims must align, got ", shifts.size(),
                " shifts and no dims (a roll of the flattened tensor takes one shift)");
    return roll_impl(atleast_1d(x).flatten(), shifts, {0}).view(x.sizes());
  }
  EMBER_CHECK(shifts.size() == dims.size(), "roll: shifts and dims must align, got ", shifts.size(),
              " shifts and ", dims.size(), " dims");
  DimVector shift(std::max<int64_t>(x.dim(), 1), 0);  // per dim, in [0, size); repeated dims add up
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim("roll", dims[i], x.dim()), n = x.dim() == 0 ? 1 : x.size(d);
    if (n > 0) shift[d] = (shift[d] + shifts[i] % n + n) % n;
  }
  IndexMaps maps = identity_maps(x);
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t n = x.size(d);
    for (int64_t i = 0; i < n; ++i) maps[d][i] = (i - shift[d] + n) % n;
  }
  return remap(x, maps);
}

// reflect and replicate pads read some inputs several times: the gradient adds up, one padded dim
// at a time, every output position into the input position it read (maps[d]).
Tensor pad_accumulate(Tensor grad, const std::vector<std::pair<int64_t, std::vector<int64_t>>>& maps,
                      const DimVector& sizes) {
  for (const auto& [d, map] : maps) {
    DimVector s(grad.sizes());
    s[d] = sizes[d];
    Tensor index = tensor(map, TensorOptions(kInt64).device(grad.device()));
    grad = index_add(zeros(s, grad.options()), d, index, grad);
  }
  return grad;
}

}  // namespace

Tensor atleast_1d(const Tensor& x) {
  detail::OpRange op_range("atleast_1d", x);
  return x.dim() == 0 ? x.as_strided({1}, {1}) : x;
}

Tensor cat(ArrayRef<Tensor> tensors, int64_t dim) {
  detail::OpRange op_range("cat", tensors);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "cat", [&](const auto&... t) { return cat(t...); }, tensors, dim);
  EMBER_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  const Tensor* ref = nullptr;  // the first tensor that is not skipped: it fixes the shape
  ScalarType dtype = first.dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    EMBER_CHECK(t.device() == first.device(),
                "cat: expected all tensors to be on the same device, but found ", first.device(),
                " (tensor 0) and ", t.device(), " (tensor ", i, ")");
    dtype = promote_types(dtype, t.dtype());
    if (!ref && !skipped_in_cat(t)) ref = &t;
  }
  TensorOptions options = TensorOptions(dtype).device(first.device());
  if (!ref) return empty({0}, options);
  dim = wrap_dim("cat", dim, ref->dim());
  DimVector shape(ref->sizes());
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_in_cat(t)) continue;
    EMBER_CHECK(t.dim() == ref->dim(), "cat: tensors must have the same number of dimensions, got ",
                ref->sizes(), " and ", t.sizes(), " (tensor number ", i, " in the list)");
    for (int64_t d = 0; d < t.dim(); ++d)
      EMBER_CHECK(d == dim || t.size(d) == ref->size(d),
                  "cat: sizes of tensors must match except in dimension ", dim, ", expected size ",
                  ref->size(d), " but got size ", t.size(d), " for tensor number ", i,
                  " in the list (shapes ", ref->sizes(), " and ", t.sizes(), ")");
    shape[dim] += t.size(dim);
  }
  Tensor out = empty(shape, options);
  std::vector<int64_t> offsets;  // where each input starts along dim; -1 for skipped ones
  int64_t offset = 0;
  {
    NoGradGuard no_grad;  // the copies are one op for autograd: recorded below
    for (const Tensor& t : tensors) {
      offsets.push_back(skipped_in_cat(t) ? -1 : offset);
      if (skipped_in_cat(t)) continue;
      out.narrow(dim, offset, t.size(dim)).copy_(t);
      offset += t.size(dim);
    }
  }
  if (needs_grad(tensors)) {
    std::vector<int64_t> lengths;
    for (const Tensor& t : tensors) lengths.push_back(skipped_in_cat(t) ? 0 : t.size(dim));
    record("cat", tensors, {out}, [dim, offsets, lengths](const GradContext& g) {
      std::vector<Tensor> grads;
      for (size_t i = 0; i < offsets.size(); ++i)
        grads.push_back(offsets[i] < 0 ? Tensor() : g.grad().narrow(dim, offsets[i], lengths[i]));
      return grads;
    });
  }
  return out;
}

Tensor stack(ArrayRef<Tensor> tensors, int64_t dim) {
  detail::OpRange op_range("stack", tensors);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "stack", [&](const auto&... t) { return stack(t...); }, tensors, dim);
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  dim = wrap_dim("stack", dim, tensors[0].dim() + 1);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].sizes().equals(tensors[0].sizes()),
                "stack: expects each tensor to be equal size, but got ", tensors[0].sizes(),
                " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

Tensor flip(const Tensor& x, IntArrayRef dims) {
  detail::OpRange op_range("flip", x);
  uint64_t mask = dims.empty() ? 0 : dim_mask("flip", dims, x.dim());
  IndexMaps maps = identity_maps(x);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask >> d & 1) std::reverse(maps[d].begin(), maps[d].end());
  return shape_op(
      "flip", x, [&] { return remap(x, maps); },
      [dims = DimVector(dims)](const Tensor& g) { return g.flip(dims); });
}

Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  detail::OpRange op_range("roll", x);
  DimVector back;  // rolling back undoes the roll
  for (int64_t s : shifts) back.push_back(-s);
  return shape_op(
      "roll", x, [&] { return roll_impl(x, shifts, dims); },
      [back, dims = DimVector(dims)](const Tensor& g) { return roll(g, back, dims); });
}

Tensor pad(const Tensor& x, IntArrayRef pad, const std::string& mode, std::optional<Scalar> value) {
  detail::OpRange op_range("pad", x);
  EMBER_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate",
              "pad: mode must be 'constant', 'reflect' or 'replicate', got '", mode, "'");
  EMBER_CHECK(mode == "constant" || !value, "pad: padding mode '", mode, "' doesn't take a value argument");
  EMBER_CHECK(pad.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", pad.size());
  EMBER_CHECK(static_cast<int64_t>(pad.size()) <= 2 * x.dim(), "pad: padding length ", pad.size(),
              " is too large for an input of shape ", x.sizes());
  DimVector out_sizes(x.sizes());
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    const int64_t d = x.dim() - 1 - static_cast<int64_t>(k);
    out_sizes[d] = checked_add("pad", checked_add("pad", x.size(d), pad[2 * k]), pad[2 * k + 1]);
  }
  // The output must be addressable before its index maps (one int64 per output position) are made.
  if (std::all_of(out_sizes.begin(), out_sizes.end(), [](int64_t s) { return s >= 0; }))
    checked_mul("pad", checked_numel("pad", out_sizes),
                static_cast<int64_t>(std::max<size_t>(x.element_size(), 8)));
  IndexMaps maps = identity_maps(x);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(k);
    int64_t n = x.size(d), before = pad[2 * k], after = pad[2 * k + 1], m = out_sizes[d];
    EMBER_CHECK(m >= 0, "pad: the input size ", n, " plus padding (", before, ", ", after,
                ") gives a negative size ", m, " at dimension ", d);
    EMBER_CHECK(mode != "reflect" || ((before <= 0 || before < n) && (after <= 0 || after < n)),
                "pad: reflect padding (", before, ", ", after, ") must be less than the size ", n,
                " of dimension ", d, " of input ", x.sizes());
    EMBER_CHECK(mode != "replicate" || n > 0 || m == 0, "pad: replicate padding (", before, ", ", after,
                ") needs a non-empty dimension ", d, " of input ", x.sizes());
    std::vector<int64_t>& map = maps[d];
    try {
      map.resize(m);
    } catch (const std::exception&) {  // bad_alloc, length_error
      throw Error(detail::str_cat("pad: cannot allocate the index map of ", m, " positions for output ",
                                  IntArrayRef(out_sizes)));
    }
    for (int64_t i = 0; i < m; ++i) {
      int64_t j = i - before;
      if (mode == "reflect")
        map[i] = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
      else if (mode == "replicate")
        map[i] = std::clamp<int64_t>(j, 0, n - 1);
      else
        map[i] = j >= 0 && j < n ? j : kRemapFill;
    }
  }
  auto forward = [&] { return remap(x, maps, value.value_or(0)); };
  if (mode == "constant") {
    // The gradient crops what was padded and pads what was cropped.
    DimVector back;
    for (int64_t p : pad) back.push_back(-p);
    return shape_op("pad", x, forward, [back](const Tensor& g) { return ember::pad(g, back); });
  }
  std::vector<std::pair<int64_t, std::vector<int64_t>>> padded;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(k);
    padded.emplace_back(d, maps[d]);
  }
  return shape_op("pad", x, forward, [padded, sizes = DimVector(x.sizes())](const Tensor& g) {
    return pad_accumulate(g, padded, sizes);
  });
}

Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  detail::OpRange op_range("repeat", x);
  EMBER_CHECK(static_cast<int64_t>(repeats.size()) >= x.dim(), "repeat: number of repeat dims (",
              repeats.size(), ") can not be smaller than the number of dimensions of the tensor (", x.dim(),
              ")");
  for (int64_t r : repeats) EMBER_CHECK(r >= 0, "repeat: repeats can not be negative, got ", repeats);
  DimVector out_sizes(repeats);
  for (int64_t d = 0; d < x.dim(); ++d)
    out_sizes[repeats.size() - x.dim() + d] =
        checked_mul("repeat", x.size(d), repeats[repeats.size() - x.dim() + d]);
  checked_numel("repeat", out_sizes);
  // x with leading size-1 dims to match repeats.
  DimVector sizes(repeats.size() - x.dim(), 1), strides(repeats.size() - x.dim(), 0);
  for (int64_t d = 0; d < x.dim(); ++d) {
    sizes.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  auto forward = [&] {
    if (repeats.empty()) return x.clone();
    Tensor xv = x.as_strided(sizes, strides);
    IndexMaps maps(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d)
      for (int64_t i = 0; i < sizes[d] * repeats[d]; ++i) maps[d].push_back(i % sizes[d]);
    return remap(xv, maps);
  };
  // Output index i along d is copy i / sizes[d] of element i % sizes[d]: split each dim into
  // (copy, element) and sum the copies.
  DimVector split, copies;
  for (size_t d = 0; d < sizes.size(); ++d) {
    copies.push_back(static_cast<int64_t>(split.size()));
    split.push_back(repeats[d]);
    split.push_back(sizes[d]);
  }
  return shape_op("repeat", x, forward, [split, copies, x_sizes = DimVector(x.sizes())](const Tensor& g) {
    return (copies.empty() ? g : g.reshape(split).sum(copies)).reshape(x_sizes);
  });
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  detail::OpRange op_range("tril", x);
  return tri("tril", x, diagonal, false);
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  detail::OpRange op_range("triu", x);
  return tri("triu", x, diagonal, true);
}

Tensor Tensor::flip(IntArrayRef dims) const { return ember::flip(*this, dims); }
Tensor Tensor::repeat(IntArrayRef repeats) const { return ember::repeat(*this, repeats); }
Tensor Tensor::tril(int64_t diagonal) const { return ember::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return ember::triu(*this, diagonal); }

}  // namespace ember
