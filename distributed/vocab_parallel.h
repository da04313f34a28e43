#pragma once

// Megatron-LM's vocabulary parallelism: the word embedding and the loss over a vocabulary split
// evenly over the ranks of a group, so neither the embedding table nor the logits of the whole
// vocabulary are held by one rank.
// - VocabParallelEmbedding: rank r holds rows [r * V/W, (r+1) * V/W) of the table; each rank
//   looks up the ids in its range (zeros elsewhere) and the lookups are summed over the group.
// - vocab_parallel_cross_entropy: cross_entropy of logits whose class dim is split the same way
//   (a ColumnParallelLinear head with gather_output(false)). Only per-position maxima, sums of
//   exponentials and target logits cross the group, never the logits.
//
//   distributed::VocabParallelEmbedding emb(distributed::VocabParallelEmbeddingOptions(30528, 768));
//   distributed::ColumnParallelLinear head(distributed::ColumnParallelLinearOptions(768, 30528)
//                                              .gather_output(false));
//   Tensor loss = distributed::vocab_parallel_cross_entropy(head(h), labels);

#include <memory>

#include "ember/distributed/process_group.h"
#include "ember/distributed/tensor_parallel_state.h"
#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::distributed {

struct VocabParallelEmbeddingOptions {
  VocabParallelEmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  EMBER_ARG(int64_t, num_embeddings);  // the whole vocabulary; divisible by the group's size
  EMBER_ARG(int64_t, embedding_dim);
  EMBER_ARG(std::shared_ptr<ProcessGroup>, group);  // null: the default group
};

class VocabParallelEmbeddingImpl : public nn::Module, public TensorParallelShards {
 public:
  // The weight is drawn whole (N(0, 1), as nn::Embedding) from the same RNG state on every rank
  // and sliced.
  explicit VocabParallelEmbeddingImpl(const VocabParallelEmbeddingOptions& options);
  // ids (int64, any shape, in [0, num_embeddings)) -> [*ids.shape, embedding_dim] on every rank.
  Tensor forward(const Tensor& ids);
  std::optional<ShardSpec> shard_spec(const std::string&) const override { return ShardSpec{}; }
  const std::shared_ptr<ProcessGroup>& shard_group() const override { return group_; }
  std::string extra_repr() const override;

  VocabParallelEmbeddingOptions options;
  Tensor weight;  // [num_embeddings / W, embedding_dim]

 private:
  std::shared_ptr<ProcessGroup> group_;
};
EMBER_MODULE(VocabParallelEmbedding);

// cross_entropy(whole_logits, target, {}, ignore_index, reduction) for logits [N, C / W], this
// rank's slice of the classes (rank r: classes [r * C/W, (r+1) * C/W)), and target [N] int64.
// Every rank gets the same loss, and the gradient of its own slice. Computed in float32 (float64
// for float64 logits); the loss in the logits' dtype.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                                    std::string_view reduction = "mean",
                                    const std::shared_ptr<ProcessGroup>& group = nullptr);

}  // namespace ember::distributed
