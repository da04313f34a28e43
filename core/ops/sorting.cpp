// Frontends of sort, argsort and topk: one kernel that sorts the first k of each line.
#include "ember/core/ops/sorting.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/shape.h"

namespace ember {

constinit DispatchStub<SortFn> sort_stub("sort");

namespace {

constexpr auto NONE = AutocastPolicy::None;

const OpRegistrar registrar({{"sort", NONE, true}, {"argsort", NONE, false}, {"topk", NONE, true}});

// dim is wrapped; a 0-dim x is one line of one element. The values' gradient goes back to the
// positions the indices name.
std::tuple<Tensor, Tensor> run_sort(const char* op, const Tensor& x, int64_t dim, int64_t k, bool descending,
                                    bool sorted) {
  DimVector shape(x.sizes());
  if (x.dim() > 0) shape[dim] = k;
  Tensor values = empty(shape, x.options());
  Tensor indices = empty(shape, TensorOptions(kInt64).device(x.device()));
  if (values.numel() > 0) {
    NoGradGuard no_grad;  // atleast_1d's view of x is not part of the graph
    sort_stub(x.device())(atleast_1d(values), atleast_1d(indices), atleast_1d(x), dim, k, descending, sorted);
  }
  if (needs_grad({x}))
    record(op, {x}, {values, indices},
           [si = SavedTensor(indices, true), sizes = DimVector(x.sizes()), dim](const GradContext& g) {
             return std::vector<Tensor>{scatter_add(zeros(sizes, g.grad().options()), dim, g(si), g.grad())};
           });
  return {values, indices};
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always*/) {
  detail::OpRange op_range("sort", x);
  dim = wrap_dim("sort", dim, x.dim());
  return run_sort("sort", x, dim, x.dim() == 0 ? 1 : x.size(dim), descending, true);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  detail::OpRange op_range("argsort", x);
  dim = wrap_dim("argsort", dim, x.dim());
  NoGradGuard no_grad;  // indices only: nothing to record
  return std::get<1>(sort(x, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  detail::OpRange op_range("topk", x);
  dim = wrap_dim("topk", dim, x.dim());
  int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  EMBER_CHECK(k >= 0 && k <= n, "topk: k (", k, ") is out of range for dimension ", dim, " of size ", n,
              " (shape ", x.sizes(), ")");
  return run_sort("topk", x, dim, k, largest, sorted);
}

}  // namespace ember
