#include "ember/distributed/vocab_parallel.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/nn_util.h"
#include "ember/core/ops/reduce.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/distributed/parallel_regions.h"
#include "ember/nn/init.h"

namespace ember::distributed {

namespace {
const char* kEmbedding = "VocabParallelEmbedding";
}  // namespace

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(const VocabParallelEmbeddingOptions& options_)
    : Module(kEmbedding), options(options_), group_(group_or_default(kEmbedding, options_.group())) {
  const int64_t rows = shard_size(kEmbedding, "num_embeddings", options.num_embeddings(), *group_);
  EMBER_CHECK(options.embedding_dim() > 0, kEmbedding, ": embedding_dim must be positive, got ",
              options.embedding_dim());
  Tensor whole = empty({options.num_embeddings(), options.embedding_dim()});
  nn::init::normal_(whole);
  weight = register_parameter("weight", whole.narrow(0, group_->rank() * rows, rows).clone());
}

Tensor VocabParallelEmbeddingImpl::forward(const Tensor& ids) {
  EMBER_CHECK(ids.dtype() == kInt64 && ids.device() == weight.device(), kEmbedding,
              ": expected int64 ids on the weight's device (", weight.device(), "), got ", ids.dtype(),
              " on ", ids.device());
  const int64_t rows = weight.size(0), first = group_->rank() * rows;
  const Tensor mine = (ids >= first) && (ids < first + rows);
  // Ids of other ranks read row 0 and are zeroed; ids outside the whole vocabulary stay out of
  // this shard's range, so embedding's own check (on the device, for CUDA) reports them.
  const Tensor elsewhere = (ids >= 0) && (ids < options.num_embeddings()) && !mine;
  const Tensor local = where(elsewhere, 0, ids - first);
  const Tensor rows_out = embedding(weight, local).masked_fill(elsewhere.unsqueeze(-1), 0);
  return reduce_from_tensor_parallel_region(rows_out, group_);
}

std::string VocabParallelEmbeddingImpl::extra_repr() const {
  return ember::detail::str_cat(options.num_embeddings(), ", ", options.embedding_dim(),
                                ", world=", group_->size());
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                    std::string_view reduction, const std::shared_ptr<ProcessGroup>& group_) {
  const char* op = "vocab_parallel_cross_entropy";
  const std::shared_ptr<ProcessGroup> group = group_or_default(op, group_);
  const Reduction r = parse_reduction(op, reduction);
  EMBER_CHECK(logits.dim() == 2 && logits.is_floating_point() && target.dim() == 1 &&
                  target.size(0) == logits.size(0) && target.dtype() == kInt64 &&
                  target.device() == logits.device(),
              op, ": expected floating logits [N, C / W] and int64 target [N] on one device, got logits ",
              logits.sizes(), " (", logits.dtype(), ", ", logits.device(), ") and target ", target.sizes(),
              " (", target.dtype(), ", ", target.device(), ")");
  const int64_t part = logits.size(1), first = group->rank() * part, classes = part * group->size();
  const ScalarType cd = nn_detail::compute_dtype(logits.dtype());
  const Tensor valid = target != ignore_index;
  const Tensor known = (target >= 0) && (target < classes);
  if (target.is_cpu())  // CUDA: gather's own check on the device reports an unknown class below
    EMBER_CHECK((known || !valid).all().item<bool>(), op, ": a target is outside [0, ", classes,
                ") and not ignore_index (", ignore_index, ")");
  const Tensor mine = (target >= first) && (target < first + part);
  // Targets of other ranks (and ignored ones) read class 0 and are zeroed; unknown ones stay
  // out of range for gather's check.
  const Tensor local = where((known && !mine) || !valid, 0, target - first);
  Tensor x, m, sums;
  {
    NoGradGuard no_grad;  // recorded below as one op
    x = logits.to(cd);
    m = amax(x, {1});
    group->all_reduce(m, ReduceOp::MAX)->wait();
    // The sum of exp(x - m) and the target's logit, this rank's share of each, summed in one call.
    const Tensor target_logit = gather(x, 1, local.unsqueeze(1)).squeeze(1).masked_fill(!mine, 0);
    sums = stack({(x - m.unsqueeze(1)).exp().sum({1}), target_logit});
    group->all_reduce(sums)->wait();
  }
  const Tensor sum_exp = sums.select(0, 0);
  Tensor losses = (sum_exp.log() + m - sums.select(0, 1)).masked_fill(!valid, 0);
  const Tensor count = valid.sum().to(cd);
  Tensor out = r == Reduction::None ? losses : r == Reduction::Sum ? losses.sum() : losses.sum() / count;
  out = out.to(logits.dtype());
  if (needs_grad({logits})) {
    SavedTensor sl(logits, false);
    record(op, {logits}, {out},
           [sl, m, sum_exp, local, mine, valid, count, r, cd](const GradContext& g) -> std::vector<Tensor> {
             NoGradGuard no_grad;
             const Tensor x = g(sl), grad = g.grad().to(cd);
             // The loss's gradient per position: d loss_n / d x[n, c] = softmax(x)[n, c] - [c == t_n].
             Tensor per = r == Reduction::None  ? grad
                          : r == Reduction::Sum ? grad.expand(valid.sizes())
                                                : (grad / count).expand(valid.sizes());
             per = per.masked_fill(!valid, 0).unsqueeze(1);
             Tensor probs = (x.to(cd) - m.unsqueeze(1)).exp() / sum_exp.unsqueeze(1);
             Tensor at_target = scatter(zeros_like(probs), 1, local.unsqueeze(1), mine.to(cd).unsqueeze(1));
             return {((probs - at_target) * per).to(x.dtype())};
           });
  }
  return out;
}

}  // namespace ember::distributed
