#include "ember/core/ops/ternary.h"

#include "ember/core/autocast_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/shape.h"
#include "ember/core/type_promotion.h"

namespace ember {
namespace {

// PyTorch's autocast lists addcmul and addcdiv as "promote" ops; lerp runs as given.
const OpRegistrar registrar({
    {"addcmul", AutocastPolicy::Promote, true},
    {"addcdiv", AutocastPolicy::Promote, true},
    {"lerp", AutocastPolicy::None, true},
});

// The three operands are defined and broadcast together; named by `op`.
void check_operands(const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
  EMBER_CHECK(a.defined() && b.defined() && c.defined(), op,
              ": an operand is undefined (default-constructed)");
  broadcast_shapes(op, broadcast_shapes(op, a.sizes(), b.sizes()), c.sizes());
}

void check_lerp(const Tensor& start, const Tensor& end) {
  EMBER_CHECK(start.defined() && end.defined(), "lerp: an operand is undefined (default-constructed)");
  EMBER_CHECK(start.is_floating_point() && start.dtype() == end.dtype(),
              "lerp: expected start and end of one ", "floating dtype, got ", start.dtype(), " and ",
              end.dtype());
}

// f16/bf16 operands run in float32 and round once, as PyTorch's kernels do (a chain of
// reduced-precision ops would round at each step).
struct Opmath {
  ScalarType dtype;
  bool reduced;
  explicit Opmath(ScalarType dt) : dtype(dt), reduced(is_reduced_float(dt)) {}
  Tensor operator()(const Tensor& t) const { return reduced ? t.to(kFloat32) : t; }
  Tensor result(const Tensor& t) const { return reduced ? t.to(dtype) : t; }
};

// The broadcast result of an in-place form must have self's shape (self is not broadcast).
const Tensor& write_into(const char* op, const Tensor& self, const Tensor& result) {
  EMBER_CHECK(result.sizes().equals(self.sizes()), op, ": the result's shape ", result.sizes(),
              " does not match the shape of the tensor written to, ", self.sizes());
  self.copy_(result);
  return self;
}

}  // namespace

Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) {
  detail::OpRange op_range("addcmul", input, tensor1, tensor2);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "addcmul", [&](const auto&... t) { return addcmul(t...); }, input, tensor1, tensor2, value);
  check_operands("addcmul", input, tensor1, tensor2);
  const Opmath m(result_type({input, tensor1, tensor2}));
  EMBER_CHECK(is_floating_point(m.dtype) || !value.is_floating_point(),
              "addcmul: for integral input tensors, argument value must not be a floating point number");
  return m.result(m(input) + m(tensor1) * m(tensor2) * value);
}

Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) {
  detail::OpRange op_range("addcdiv", input, tensor1, tensor2);
  if (amp::detail::autocast_pending)
    return amp::autocast_call(
        "addcdiv", [&](const auto&... t) { return addcdiv(t...); }, input, tensor1, tensor2, value);
  check_operands("addcdiv", input, tensor1, tensor2);
  EMBER_CHECK(tensor1.is_floating_point() || tensor2.is_floating_point(),
              "addcdiv: integer division of tensors (", tensor1.dtype(), " and ", tensor2.dtype(),
              ") is not supported; divide by a floating point tensor");
  const Opmath m(result_type({input, tensor1, tensor2}));
  return m.result(m(input) + m(tensor1) / m(tensor2) * value);
}

Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  detail::OpRange op_range("lerp", start, end);
  check_lerp(start, end);
  broadcast_shapes("lerp", start.sizes(), end.sizes());
  const double w = weight.to_double();
  const Opmath m(start.dtype());
  const Tensor s = m(start), e = m(end), d = e - s;
  return m.result(std::abs(w) < 0.5 ? s + d * w : e - d * (1 - w));
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  detail::OpRange op_range("lerp", start, end, weight);
  check_lerp(start, end);
  check_operands("lerp", start, end, weight);
  EMBER_CHECK(weight.dtype() == start.dtype(), "lerp: expected a weight of dtype ", start.dtype(), ", got ",
              weight.dtype());
  const Opmath m(start.dtype());
  const Tensor s = m(start), e = m(end), w = m(weight), d = e - s;
  return m.result(where(abs(w) < 0.5, s + d * w, e - d * (1 - w)));
}

Tensor Tensor::addcmul(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return ember::addcmul(*this, tensor1, tensor2, value);
}
Tensor Tensor::addcdiv(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return ember::addcdiv(*this, tensor1, tensor2, value);
}
Tensor Tensor::lerp(const Tensor& end, const Scalar& weight) const { return ember::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return ember::lerp(*this, end, weight); }

const Tensor& Tensor::addcmul_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  detail::OpRange op_range("addcmul_", *this, tensor1, tensor2);
  return write_into("addcmul_", *this, ember::addcmul(*this, tensor1, tensor2, value));
}
const Tensor& Tensor::addcdiv_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  detail::OpRange op_range("addcdiv_", *this, tensor1, tensor2);
  return write_into("addcdiv_", *this, ember::addcdiv(*this, tensor1, tensor2, value));
}
const Tensor& Tensor::lerp_(const Tensor& end, const Scalar& weight) const {
  detail::OpRange op_range("lerp_", *this, end);
  return write_into("lerp_", *this, ember::lerp(*this, end, weight));
}
const Tensor& Tensor::lerp_(const Tensor& end, const Tensor& weight) const {
  detail::OpRange op_range("lerp_", *this, end, weight);
  return write_into("lerp_", *this, ember::lerp(*this, end, weight));
}

}  // namespace ember
