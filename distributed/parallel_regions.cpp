#include "ember/distributed/parallel_regions.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {

namespace {

using Group = std::shared_ptr<ProcessGroup>;

// The sum of x over the group, in a new tensor.
Tensor summed(const Tensor& x, const Group& group) {
  Tensor out = x.clone(MemoryFormat::Contiguous);  // one copy, dense for the collective
  if (group->size() > 1) group->all_reduce(out)->wait();
  return out;
}

// x's dim `dim` (wrapped), after checking that it splits evenly over the group.
int64_t split_dim(const char* op, const Tensor& x, int64_t dim, const Group& group) {
  EMBER_CHECK(x.dim() >= 1, op, ": expected at least 1 dim, got a 0-dim tensor");
  EMBER_CHECK(dim >= -x.dim() && dim < x.dim(), op, ": dim ", dim, " is out of range for ", x.sizes());
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  EMBER_CHECK(x.size(d) % group->size() == 0, op, ": dim ", d, " of ", x.sizes(),
              " does not split evenly over ", group->size(), " ranks");
  return d;
}

// This rank's slice of x along dim.
Tensor sliced(const char* op, const Tensor& x, int64_t dim, const Group& group) {
  const int64_t d = split_dim(op, x, dim, group), k = x.size(d) / group->size();
  return x.narrow(d, group->rank() * k, k).contiguous();
}

// The sum of x over the group, of which this rank keeps its slice along dim.
Tensor reduce_scattered(const char* op, const Tensor& x, int64_t dim, const Group& group) {
  const int64_t d = split_dim(op, x, dim, group), world = group->size();
  if (world == 1) return x.clone(MemoryFormat::Contiguous);
  // The ranks' slices one after the other along a new leading dim, as the collective takes them.
  std::vector<int64_t> order{d};
  for (int64_t i = 0; i <= x.dim(); ++i)
    if (i != d) order.push_back(i);
  const Tensor stacked = x.unflatten(d, {world, x.size(d) / world}).permute(order).contiguous();
  Tensor out = empty(IntArrayRef(stacked.sizes().data() + 1, stacked.sizes().size() - 1), x.options());
  group->reduce_scatter_tensor(out, stacked)->wait();
  return out;
}

// out = forward(x), recorded with `backward` of the output's gradient.
template <class F, class B>
Tensor region(const char* op, const Tensor& x, F forward, B backward) {
  Tensor out;
  {
    NoGradGuard no_grad;  // the collective itself is not recorded, the region is
    out = forward(x);
  }
  if (needs_grad({x}))
    record(op, {x}, {out}, [backward](const GradContext& g) -> std::vector<Tensor> {
      NoGradGuard no_grad;
      return {backward(g.grad())};
    });
  return out;
}

}  // namespace

Tensor all_gather_along(const Tensor& x, int64_t dim, const std::shared_ptr<ProcessGroup>& group) {
  if (group->size() == 1) return x.contiguous().clone();
  DimVector stacked{group->size()};
  for (int64_t s : x.sizes()) stacked.push_back(s);
  Tensor all = empty(stacked, x.options());
  group->all_gather_into_tensor(all, x.contiguous())->wait();
  std::vector<Tensor> parts;
  for (int64_t r = 0; r < group->size(); ++r) parts.push_back(all.select(0, r));
  return cat(parts, dim);
}

int64_t shard_size(const char* layer, const char* what, int64_t n, const ProcessGroup& group) {
  EMBER_CHECK(n > 0 && n % group.size() == 0, layer, ": ", what, " (", n,
              ") must be positive and divisible by ", "the group's size (", group.size(), ")");
  return n / group.size();
}

std::shared_ptr<ProcessGroup> group_or_default(const char* op, const std::shared_ptr<ProcessGroup>& group) {
  if (group) return group;
  EMBER_CHECK(is_initialized(), op,
              ": no process group: call distributed::init_process_group first, or pass a group");
  return default_group();
}

Tensor copy_to_tensor_parallel_region(const Tensor& x, const Group& group) {
  const char* op = "copy_to_tensor_parallel_region";
  Group g = group_or_default(op, group);
  return region(
      op, x, [](const Tensor& t) { return t.detach(); }, [g](const Tensor& grad) { return summed(grad, g); });
}

Tensor reduce_from_tensor_parallel_region(const Tensor& x, const Group& group) {
  const char* op = "reduce_from_tensor_parallel_region";
  Group g = group_or_default(op, group);
  return region(
      op, x, [g](const Tensor& t) { return summed(t, g); }, [](const Tensor& grad) { return grad; });
}

Tensor gather_from_tensor_parallel_region(const Tensor& x, const Group& group) {
  const char* op = "gather_from_tensor_parallel_region";
  Group g = group_or_default(op, group);
  EMBER_CHECK(x.dim() >= 1, op, ": expected at least 1 dim, got a 0-dim tensor");
  return region(
      op, x, [g](const Tensor& t) { return all_gather_along(t, -1, g); },
      [g, op](const Tensor& grad) { return sliced(op, grad, -1, g); });
}

Tensor scatter_to_tensor_parallel_region(const Tensor& x, const Group& group) {
  const char* op = "scatter_to_tensor_parallel_region";
  Group g = group_or_default(op, group);
  return region(
      op, x, [g, op](const Tensor& t) { return sliced(op, t, -1, g); },
      [g](const Tensor& grad) { return all_gather_along(grad, -1, g); });
}

Tensor gather_from_sequence_parallel_region(const Tensor& x, int64_t dim, const Group& group) {
  const char* op = "gather_from_sequence_parallel_region";
  Group g = group_or_default(op, group);
  EMBER_CHECK(x.dim() >= 1, op, ": expected at least 1 dim, got a 0-dim tensor");
  EMBER_CHECK(dim >= -x.dim() && dim < x.dim(), op, ": dim ", dim, " is out of range for ", x.sizes());
  return region(
      op, x, [g, dim](const Tensor& t) { return all_gather_along(t, dim, g); },
      [g, dim, op](const Tensor& grad) { return reduce_scattered(op, grad, dim, g); });
}

Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, int64_t dim, const Group& group) {
  const char* op = "reduce_scatter_to_sequence_parallel_region";
  Group g = group_or_default(op, group);
  return region(
      op, x, [g, dim, op](const Tensor& t) { return reduce_scattered(op, t, dim, g); },
      [g, dim](const Tensor& grad) { return all_gather_along(grad, dim, g); });
}

Tensor scatter_to_sequence_parallel_region(const Tensor& x, int64_t dim, const Group& group) {
  const char* op = "scatter_to_sequence_parallel_region";
  Group g = group_or_default(op, group);
  return region(
      op, x, [g, dim, op](const Tensor& t) { return sliced(op, t, dim, g); },
      [g, dim](const Tensor& grad) { return all_gather_along(grad, dim, g); });
}

}  // namespace ember::distributed
