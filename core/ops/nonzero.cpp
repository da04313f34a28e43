// nonzero and masked_select: a running count of the selected elements gives each its output
// row; the count's last value, read back, gives the output's size.
#include "ember/core/ops/nonzero.h"

#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/scan.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<NonzeroFn> nonzero_stub("nonzero");

namespace {

const OpRegistrar registrar({
    {"nonzero", AutocastPolicy::None, false},
    {"masked_select", AutocastPolicy::None, true},
});

Tensor nonzero_impl(const char* op, const Tensor& x) {
  EMBER_CHECK(x.defined(), op, ": expected a tensor, got an undefined one");
  const Tensor flags = x.dtype() == kBool ? x : ne(x, 0);
  const Tensor count = cumsum(flags.reshape({-1}), 0, kInt64);
  const int64_t n = x.numel() > 0 ? count[x.numel() - 1].item<int64_t>() : 0;
  Tensor out = empty({n, x.dim()}, TensorOptions(kInt64).device(x.device()));
  if (n > 0 && x.dim() > 0) nonzero_stub(x.device())(out, count, x.sizes());
  return out;
}

}  // namespace

Tensor nonzero(const Tensor& x) {
  detail::OpRange op_range("nonzero", x);
  return nonzero_impl("nonzero", x);
}
Tensor argwhere(const Tensor& x) {
  detail::OpRange op_range("argwhere", x);
  return nonzero_impl("argwhere", x);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  detail::OpRange op_range("masked_select", x, mask);
  const char* op = "masked_select";
  EMBER_CHECK(x.defined() && mask.defined(), op, ": expected defined tensors");
  EMBER_CHECK(mask.dtype() == kBool, op, ": expected a bool mask, got ", mask.dtype());
  EMBER_CHECK(x.device() == mask.device(), op, ": expected x and mask on one device, got ", x.device(),
              " and ", mask.device());
  const DimVector shape = broadcast_shapes(op, x.sizes(), mask.sizes());
  const Tensor where = nonzero_impl(op, mask.expand(shape).reshape({-1})).view({-1});
  return x.expand(shape).reshape({-1}).index_select(0, where);
}

Tensor Tensor::nonzero() const { return ember::nonzero(*this); }
Tensor Tensor::argwhere() const { return ember::argwhere(*this); }
Tensor Tensor::masked_select(const Tensor& mask) const { return ember::masked_select(*this, mask); }

}  // namespace ember
