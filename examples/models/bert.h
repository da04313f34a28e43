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
// With BertLikeOptions::tensor_parallel(group), the same model split over the group's ranks; with
// pipeline_stage(i, n), stage i of n of it (forward_stage and loss, for distributed::PipelineStage).
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
  // With tensor_parallel, Megatron's sequence parallelism too: between the layers' blocks each rank
  // keeps its slice of the sequence (seq must divide by the group's size), so the LayerNorms,
  // dropouts and residual adds work on 1/W of the tokens; the head gathers the sequence back.
  EMBER_ARG(bool, sequence_parallel) = false;

 public:
  // Holds only stage `stage` of `stages` (0-based): the embeddings on the first, its share of the
  // layers (consecutive, the first stages one more when they do not divide), the head on the
  // last. Parameters are drawn as for the whole model and keep its state-dict keys.
  BertLikeOptions& pipeline_stage(int64_t stage, int64_t stages) {
    stage_ = stage;
    stages_ = stages;
    return *this;
  }
  int64_t stage() const { return stage_; }
  int64_t stages() const { return stages_; }

 private:
  int64_t stage_ = 0, stages_ = 1;
};

class BertLikeImpl : public nn::Module {
 public:
  explicit BertLikeImpl(const BertLikeOptions& options = {});
  // The mean cross-entropy of the head's logits against `labels`. With `checkpoint`, each encoder
  // layer runs under autograd::checkpoint (its activations are recomputed in backward).
  // The whole model only (one pipeline stage).
  Tensor forward(const Tensor& ids, const Tensor& positions, const Tensor& labels, bool checkpoint = false);
  // A pipeline stage's part: the first stage takes ids [batch, seq] (positions 0..seq-1), the
  // others the previous stage's hidden states; returns this stage's hidden states.
  Tensor forward_stage(const Tensor& input, bool checkpoint = false);
  // The head's mean cross-entropy of hidden states against labels (the last stage only).
  Tensor loss(const Tensor& hidden, const Tensor& labels);

  BertLikeOptions options;
  nn::Embedding pos{nullptr};  // null but on the first stage
  nn::LayerNorm norm{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleDict layers{nullptr};  // by the whole model's layer index: this stage's layers

 private:
  // The first stage's part: embeddings, LayerNorm, dropout (this rank's slice of the sequence with
  // sequence_parallel).
  Tensor embed(const Tensor& ids, const Tensor& positions);
  Tensor run_layers(Tensor x, bool checkpoint);

  // The parts whose modules depend on tensor parallelism ("tok", each layer, "head" and its loss).
  std::function<Tensor(const Tensor&)> embed_tokens_;
  std::vector<std::function<Tensor(const Tensor&)>> layer_forwards_;
  std::function<Tensor(const Tensor& x, const Tensor& labels)> head_loss_;
};
EMBER_MODULE(BertLike);

}  // namespace ember::models
