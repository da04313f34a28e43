#include "ember/core/copy.h"

#include "ember/core/autograd_meta.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<CopyFn> copy_stub("copy_", DeviceMix::Any);
constinit DispatchStub<FillFn> fill_stub("fill_");

void check_no_internal_overlap(const char* op, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    EMBER_CHECK(t.stride(d) != 0 || t.size(d) <= 1, op,
                ": unsupported operation: more than one element of the written-to tensor refers to a "
                "single memory location (shape ",
                t.sizes(), ", strides ", t.strides(), "); clone() it first");
}

void check_no_partial_overlap(const char* op, const Tensor& out, const Tensor& in) {
  if (!out.defined() || !in.defined() || out.numel() == 0 || in.numel() == 0) return;
  if (out.impl().storage().get() != in.impl().storage().get()) return;
  if (!out.is_non_overlapping_and_dense() || !in.is_non_overlapping_and_dense()) return;
  if (out.data_ptr() == in.data_ptr() && out.sizes().equals(in.sizes()) && out.strides().equals(in.strides()))
    return;
  // Dense: each covers numel contiguous elements from its lowest address.
  auto lowest = [](const Tensor& t) {
    int64_t back = 0;  // negative strides are not made by ember's views, but be exact
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.stride(d) < 0) back += (t.size(d) - 1) * t.stride(d);
    return static_cast<const char*>(t.data_ptr()) + back * static_cast<int64_t>(t.element_size());
  };
  const char *a = lowest(out), *b = lowest(in);
  const char *a_end = a + out.numel() * static_cast<int64_t>(out.element_size()),
             *b_end = b + in.numel() * static_cast<int64_t>(in.element_size());
  EMBER_CHECK(
      a_end <= b || b_end <= a, op,
      ": unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
      "single memory location (input ",
      in.sizes(), " strides ", in.strides(), ", output ", out.sizes(), " strides ", out.strides(),
      "); clone() the input first");
}

const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  detail::OpRange op_range("copy_", *this, src);
  check_no_internal_overlap("copy_", *this);
  check_no_partial_overlap("copy_", *this, src);
  check_inplace("copy_", {*this, src});
  DimVector b = broadcast_shapes("copy_", src.sizes(), sizes());
  EMBER_CHECK(IntArrayRef(b).equals(sizes()), "copy_: source of shape ", src.sizes(),
              " cannot be broadcast to destination of shape ", sizes());
  if (numel() == 0) return *this;
  Device d = src.is_cuda() ? src.device() : device();
  copy_stub(d)(*this, src.dim() > dim() ? src.reshape(sizes()) : src, non_blocking);
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  std::as_const(*this).copy_(src, non_blocking);
  return *this;
}

const Tensor& Tensor::fill_(const Scalar& value) const {
  detail::OpRange op_range("fill_", *this);
  check_no_internal_overlap("fill_", *this);
  check_inplace("fill_", {*this});
  if (numel() > 0) fill_stub(device())(*this, value);
  bump_version();
  return *this;
}

namespace {

// A copy into a new tensor (clone, to), laid out by options.memory_format (unset: Preserve), is
// differentiable: the gradient comes back unchanged, on the source's device (the engine casts it
// back to the source's dtype).
Tensor copy_of(const Tensor& src, const TensorOptions& options, bool non_blocking = false) {
  Tensor out = empty_like(src, options);
  {
    NoGradGuard no_grad;
    out.copy_(src, non_blocking);
  }
  if (needs_grad({src}))
    record("clone", {src}, {out}, [device = src.device()](const GradContext& g) -> std::vector<Tensor> {
      return {g.grad().to(device)};
    });
  return out;
}

}  // namespace

Tensor Tensor::clone(MemoryFormat memory_format) const {
  detail::OpRange op_range("clone", *this);
  check_memory_format_rank("clone", memory_format, sizes());
  return copy_of(*this, options().memory_format(memory_format));
}

Tensor Tensor::to(const TensorOptions& options, bool non_blocking, bool copy) const {
  detail::OpRange op_range("to", *this);
  ScalarType dt = options.has_dtype() ? options.dtype() : dtype();
  Device dev = options.device();
  const MemoryFormat format = options.memory_format_opt().value_or(MemoryFormat::Preserve);
  check_memory_format_rank("to", format, sizes());
  if (!copy && dt == dtype() && dev.type == device().type &&
      (dev.index < 0 || dev.index == device().index || device().index < 0) &&
      (format == MemoryFormat::Preserve || format == suggest_memory_format()))
    return *this;
  return copy_of(*this, TensorOptions(dt).device(dev).memory_format(format), non_blocking);
}

Tensor Tensor::to(ScalarType dt, bool non_blocking, bool copy) const {
  return to(TensorOptions(dt).device(device()), non_blocking, copy);
}
Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const {
  return to(TensorOptions(dtype()).device(dev), non_blocking, copy);
}
Tensor Tensor::to(Device dev, ScalarType dt, bool non_blocking, bool copy) const {
  return to(TensorOptions(dt).device(dev), non_blocking, copy);
}

Scalar Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: a Tensor with ", numel(), " elements (shape ", sizes(),
              ") cannot be converted to Scalar");
  Tensor c = is_cpu() ? *this : cpu();
  const void* p = c.data_ptr();
  return visit_dtype(dtype(), [&](auto tag) {
    using T = decltype(tag);
    return Scalar(*static_cast<const T*>(p));
  });
}

}  // namespace ember
