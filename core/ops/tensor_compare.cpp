#include "ember/core/ops/tensor_compare.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/shape.h"

namespace ember {

bool equal(const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "equal: expected two defined tensors");
  EMBER_CHECK(a.device() == b.device(), "equal: expected both tensors on one device, got ", a.device(),
              " and ", b.device());
  if (!a.sizes().equals(b.sizes())) return false;
  if (a.numel() == 0) return true;
  NoGradGuard no_grad;
  return eq(a, b).all().item<bool>();
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  detail::OpRange op_range("isclose", a, b);
  EMBER_CHECK(a.defined() && b.defined(), "isclose: expected two defined tensors");
  EMBER_CHECK(rtol >= 0 && atol >= 0, "isclose: rtol and atol must be non-negative, got rtol ", rtol,
              " and atol ", atol);
  EMBER_CHECK(a.dtype() != kBool && b.dtype() != kBool, "isclose: not defined for bool tensors");
  broadcast_shapes("isclose", a.sizes(), b.sizes());
  NoGradGuard no_grad;
  Tensor same = eq(a, b);  // exact matches, the infinities among them
  // Integers in float64, so that |a - b| cannot wrap.
  const bool floating = is_floating_point(promote_types(a.dtype(), b.dtype()));
  Tensor x = floating ? a : a.to(kFloat64), y = floating ? b : b.to(kFloat64);
  // A finite error only: inf - inf and anything with NaN are not close by arithmetic.
  Tensor err = abs(x - y);
  Tensor close = logical_or(same, logical_and(lt(err, INFINITY), le(err, abs(y) * rtol + atol)));
  return equal_nan ? logical_or(close, logical_and(ne(a, a), ne(b, b))) : close;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  EMBER_CHECK(a.defined() && b.defined(), "allclose: expected two defined tensors");
  broadcast_shapes("allclose", a.sizes(), b.sizes());
  Tensor c = isclose(a, b, rtol, atol, equal_nan);
  return c.numel() == 0 || c.all().item<bool>();
}

Tensor isnan(const Tensor& x) {
  detail::OpRange op_range("isnan", x);
  EMBER_CHECK(x.defined(), "isnan: expected a defined tensor");
  NoGradGuard no_grad;
  return ne(x, x);
}

Tensor isinf(const Tensor& x) {
  detail::OpRange op_range("isinf", x);
  EMBER_CHECK(x.defined(), "isinf: expected a defined tensor");
  NoGradGuard no_grad;
  return x.is_floating_point() ? eq(abs(x), INFINITY)
                               : zeros_like(x, TensorOptions(kBool).device(x.device()));
}

Tensor isfinite(const Tensor& x) {
  detail::OpRange op_range("isfinite", x);
  EMBER_CHECK(x.defined(), "isfinite: expected a defined tensor");
  NoGradGuard no_grad;
  return x.is_floating_point() ? lt(abs(x), INFINITY) : ones_like(x, TensorOptions(kBool).device(x.device()));
}

bool Tensor::equal(const Tensor& other) const { return ember::equal(*this, other); }
Tensor Tensor::isnan() const { return ember::isnan(*this); }
Tensor Tensor::isinf() const { return ember::isinf(*this); }
Tensor Tensor::isfinite() const { return ember::isfinite(*this); }
Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return ember::isclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return ember::allclose(*this, other, rtol, atol, equal_nan);
}

}  // namespace ember
