#pragma once

// Embedding: a lookup table of num_embeddings rows of size embedding_dim.

#include <optional>

#include "ember/nn/module.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  EMBER_ARG(int64_t, num_embeddings);
  EMBER_ARG(int64_t, embedding_dim);
  // A row (negative: from the end) initialised to zeros that never receives a gradient.
  EMBER_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};

// indices (int64 or int32, any shape) -> indices.shape + [embedding_dim].
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  // PyTorch's default: weight ~ N(0, 1), the padding row zeros.
  void reset_parameters();
  Tensor forward(const Tensor& indices);
  std::string extra_repr() const override;

  EmbeddingOptions options;  // padding_idx made non-negative
  Tensor weight;             // [num_embeddings, embedding_dim]
};

class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  using Impl = EmbeddingImpl;
  // nn.Embedding.from_pretrained: the table is a copy of `embeddings` [num_embeddings,
  // embedding_dim], frozen (requires_grad false) unless `freeze` is false; the padding row is
  // left as given.
  static Embedding from_pretrained(const Tensor& embeddings, bool freeze = true,
                                   std::optional<int64_t> padding_idx = std::nullopt);
};

}  // namespace ember::nn
