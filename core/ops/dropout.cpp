// dropout as a composite of a Bernoulli draw (core/random.h, Philox) and where(): any device
// with those kernels runs it.
#include "ember/core/ops/dropout.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/random.h"

namespace ember {
namespace {

const OpRegistrar registrar({{"dropout", AutocastPolicy::None, true}});

void check_args(const Tensor& x, double p) {
  EMBER_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK(x.is_floating_point(), "dropout: expected a floating point input, got ", x.dtype());
}

}  // namespace

std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training,
                                          Generator* gen) {
  check_args(x, p);
  if (!training || p == 0)
    return {x.clone(), ones(x.sizes(), TensorOptions(kBool).device(x.device()))};
  Tensor mask = empty(x.sizes(), TensorOptions(kBool).device(x.device()));
  bernoulli_(mask, 1 - p, gen);
  // p == 1 keeps nothing: zeros, not 0 * inf.
  auto apply = [p](const Tensor& t, const Tensor& keep) {
    return p == 1 ? zeros_like(t) : where(keep, t * (1 / (1 - p)), 0);
  };
  Tensor out;
  {
    NoGradGuard no_grad;  // recorded below: the backward needs only the mask
    out = apply(x, mask);
  }
  if (needs_grad({x}))
    record("dropout", {x}, {out},
           [apply, sm = SavedTensor(mask, false)](const GradContext& g) -> std::vector<Tensor> {
             return {apply(g.grad(), g(sm))};
           });
  return {out, mask};
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_args(x, p);
  if (!training || p == 0) return x;
  return std::get<0>(native_dropout(x, p, training, gen));
}

}  // namespace ember
