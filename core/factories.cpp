#include "ember/core/factories.h"

#include <cmath>

#include "ember/core/op_range.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<RangeFn> range_stub("range");

namespace {

// full, zeros and ones, each checking the shape in its own name.
Tensor filled(const char* op, IntArrayRef sizes, const Scalar& value, TensorOptions options) {
  checked_nbytes(op, sizes, static_cast<int64_t>(element_size(options.dtype())));
  Tensor t = empty(sizes, options);
  t.fill_(value);
  return t;
}

// The storage for a tensor of these sizes and strides, checked in the name of `op`.
Tensor allocate(const char* op, IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  check_sizes(op, sizes);
  EMBER_CHECK(sizes.size() == strides.size(), op, ": got ", sizes.size(), " sizes but ",
              strides.size(), " strides");
  checked_numel(op, sizes);
  const int64_t span = checked_span(op, sizes, strides);
  const auto nbytes = static_cast<size_t>(
      checked_mul(op, span, static_cast<int64_t>(element_size(options.dtype()))));
  Storage storage = make_storage(nbytes, options.device());
  return Tensor(IntrusivePtr<TensorImpl>::make(storage, options.dtype(), sizes, strides, 0));
}

}  // namespace

Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options) {
  detail::OpRange op_range("empty_strided");
  return allocate("empty_strided", sizes, strides, options);
}

Tensor empty(IntArrayRef sizes, TensorOptions options) {
  detail::OpRange op_range("empty");
  checked_nbytes("empty", sizes, static_cast<int64_t>(element_size(options.dtype())));
  const MemoryFormat format = options.memory_format_opt().value_or(MemoryFormat::Contiguous);
  EMBER_CHECK(format != MemoryFormat::Preserve, "empty: memory format Preserve is not supported, use ",
              "Contiguous or ChannelsLast");
  if (format == MemoryFormat::ChannelsLast)
    return allocate("empty", sizes, channels_last_strides("empty", sizes), options);
  return allocate("empty", sizes, contiguous_strides(sizes), options);
}

Tensor zeros(IntArrayRef sizes, TensorOptions options) {
  detail::OpRange op_range("zeros");
  return filled("zeros", sizes, 0, options.dtype(options.dtype()));
}
Tensor ones(IntArrayRef sizes, TensorOptions options) {
  detail::OpRange op_range("ones");
  return filled("ones", sizes, 1, options.dtype(options.dtype()));
}

Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options) {
  detail::OpRange op_range("full");
  if (!options.has_dtype()) options = options.dtype(value.default_dtype());
  return filled("full", sizes, value, options);
}

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options) {
  detail::OpRange op_range("empty_like", t);
  TensorOptions o =
      options.value_or(t.options()).dtype(options && options->has_dtype() ? options->dtype() : t.dtype());
  if (o.memory_format_opt().value_or(MemoryFormat::Preserve) != MemoryFormat::Preserve)
    return empty(t.sizes(), o);
  // Preserve, as PyTorch: t's strides when t is dense, else its order of dims made dense.
  o = o.memory_format(std::nullopt);
  if (t.is_non_overlapping_and_dense()) return empty_strided(t.sizes(), t.strides(), o);
  return empty_strided(t.sizes(), dense_strides_like(t.sizes(), {t.strides()}), o);
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options) {
  detail::OpRange op_range("zeros_like", t);
  return full_like(t, 0, options);
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options) {
  detail::OpRange op_range("ones_like", t);
  return full_like(t, 1, options);
}
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> options) {
  detail::OpRange op_range("full_like", t);
  Tensor out = empty_like(t, options);
  out.fill_(value);
  return out;
}

Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  detail::OpRange op_range("arange");
  bool all_int = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  if (!options.has_dtype()) options = options.dtype(all_int ? kInt64 : kFloat32);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  EMBER_CHECK(st != 0, "arange: step must be nonzero");
  EMBER_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  EMBER_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
              "arange: upper bound and larger bound inconsistent with step sign");
  int64_t n = all_int
                  ? (end.to_long() - start.to_long() + step.to_long() - (st > 0 ? 1 : -1)) / step.to_long()
                  : static_cast<int64_t>(std::ceil((e - s) / st));
  checked_nbytes("arange", {n}, static_cast<int64_t>(element_size(options.dtype())));
  Tensor out = empty({n}, options);
  if (n > 0) range_stub(out.device())(out, s, e, st, n);
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  detail::OpRange op_range("linspace");
  EMBER_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  checked_nbytes("linspace", {steps}, static_cast<int64_t>(element_size(options.dtype())));
  Tensor out = empty({steps}, options);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  // Symmetric fill from both ends, as PyTorch, so the last element is exactly `end`; one step is
  // `start`.
  if (steps > 0) range_stub(out.device())(out, start, end, step, steps == 1 ? 1 : steps / 2);
  return out;
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions options) {
  detail::OpRange op_range("eye");
  int64_t cols = m.value_or(n);
  EMBER_CHECK(n >= 0 && cols >= 0, "eye: n and m must be non-negative, got ", n, " and ", cols);
  checked_nbytes("eye", {n, cols}, static_cast<int64_t>(element_size(options.dtype())));
  Tensor out = zeros({n, cols}, options);
  int64_t k = std::min(n, cols);
  if (k > 0) out.as_strided({k}, {cols + 1}, 0).fill_(1);
  return out;
}

Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options, std::function<void(void*)> deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), options, std::move(deleter));
}

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options,
                 std::function<void(void*)> deleter) {
  detail::OpRange op_range("from_blob");
  check_sizes("from_blob", sizes);
  EMBER_CHECK(sizes.size() == strides.size(), "from_blob: got ", sizes.size(), " sizes but ", strides.size(),
              " strides");
  EMBER_CHECK(data || numel_of(sizes) == 0, "from_blob: data is null");
  int64_t span = numel_of(sizes) == 0 ? 0 : 1;
  for (size_t d = 0; d < sizes.size() && span > 0; ++d) span += (sizes[d] - 1) * strides[d];
  DataPtr p{data, nullptr, nullptr, options.device()};
  if (deleter) {
    struct Ctx {
      void* data;
      std::function<void(void*)> fn;
    };
    p.ctx = new Ctx{data, std::move(deleter)};
    p.deleter = [](void* c) {
      auto* ctx = static_cast<Ctx*>(c);
      ctx->fn(ctx->data);
      delete ctx;
    };
  }
  Storage storage = Storage::make(p, static_cast<size_t>(span) * element_size(options.dtype()));
  return Tensor(IntrusivePtr<TensorImpl>::make(storage, options.dtype(), sizes, strides, 0));
}

namespace {

void collect(const NestedList& l, size_t depth, const DimVector& shape, std::vector<Scalar>& out) {
  if (l.is_scalar()) {
    EMBER_CHECK(depth == shape.size(), "tensor: ragged nested list: a number at depth ", depth,
                " where shape ", IntArrayRef(shape), " expects a list");
    out.push_back(l.scalar());
    return;
  }
  EMBER_CHECK(depth < shape.size() && shape[depth] == static_cast<int64_t>(l.list().size()),
              "tensor: ragged nested list: a list of length ", l.list().size(), " at depth ", depth,
              " where shape ", IntArrayRef(shape), " expects otherwise");
  for (const NestedList& c : l.list()) collect(c, depth + 1, shape, out);
}

}  // namespace

Tensor tensor(const NestedList& data, TensorOptions options) {
  detail::OpRange op_range("tensor");
  DimVector shape;  // from the first element at each depth; collect() checks the rest
  for (const NestedList* c = &data; !c->is_scalar(); c = &c->list()[0]) {
    shape.push_back(static_cast<int64_t>(c->list().size()));
    if (c->list().empty()) break;
  }
  std::vector<Scalar> values;
  collect(data, 0, shape, values);
  ScalarType dt = options.has_dtype() ? options.dtype() : kBool;
  if (!options.has_dtype())
    for (const Scalar& v : values) {
      ScalarType vt = v.default_dtype();
      if (vt > dt) dt = vt;
    }
  if (values.empty() && !options.has_dtype()) dt = kFloat32;
  Tensor out = empty(shape, TensorOptions(dt));
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i].to<T>();
  });
  return out.to(options.device());
}

}  // namespace ember
