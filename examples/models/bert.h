#pragma once

// A BERT-style masked-LM model, the workload of tools/bench/transformer_bench and scaling_bench:
// token + position embeddings, LayerNorm (eps 1e-12) and dropout, `layers` post-LN transformer
// encoder layers (GELU, batch-first), and a linear head over the vocabulary with cross-entropy at
// every position. The defaults are BERT-base's sizes. tools/bench/torch_transformer_bench.py
// defines the same model in PyTorch (BertLike).
//
//   models::BertLike model(models::BertLikeOptions().layers(2));
//   Tensor loss = model(ids, positions, labels);  // ids, labels [batch, seq] int64; positions [seq]
//
// With BertLikeOptions::tensor_parallel(group), the same model split over the group's ranks.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ember/distributed/process_group.h>
#include <ember/ember.h>

namespace ember::models {

struct BertLikeOptions {
  EMBER_ARG(int64_t, vocab_size) = 30522;
  EMBER_ARG(int64_t, max_positions) = 512;
  EMBER_ARG(int64_t, d_model) = 768;
  EMBER_ARG(int64_t, heads) = 12;
  EMBER_ARG(int64_t, dim_feedforward) = 3072;
  EMBER_ARG(int64_t, layers) = 12;
  EMBER_ARG(double, dropout) = 0.1;
  // Splits the model over this group, Megatron-style: the vocabulary (vocab_size must divide by
  // the group's size) in the embedding, head and loss, and the heads and feed-forward units of
  // each layer. The state dict's keys stay the same (distributed::full_state_dict gives the
  // whole model's). Null: one process.
  EMBER_ARG(std::shared_ptr<distributed::ProcessGroup>, tensor_parallel);
};

class BertLikeImpl : public nn::Module {
 public:
  explicit BertLikeImpl(const BertLikeOptions& options = {});
  // The mean cross-entropy of the head's logits against `labels`. With `checkpoint`, each encoder
  // layer runs under autograd::checkpoint (its activations are recomputed in backward).
  Tensor forward(const Tensor& ids, const Tensor& positions, const Tensor& labels, bool checkpoint = false);

  BertLikeOptions options;
  nn::Embedding pos{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleList layers{nullptr};

 private:
  // The parts whose modules depend on tensor parallelism ("tok", each layer, "head" and its loss).
  std::function<Tensor(const Tensor&)> embed_tokens_;
  std::vector<std::function<Tensor(const Tensor&)>> layer_forwards_;
  std::function<Tensor(const Tensor& x, const Tensor& labels)> head_loss_;
};
EMBER_MODULE(BertLike);

}  // namespace ember::models
