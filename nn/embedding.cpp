#include "ember/nn/embedding.h"

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/embedding.h"
#include "ember/nn/init.h"

namespace ember::nn {

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& options_) : Module("Embedding"), options(options_) {
  int64_t n = options.num_embeddings();
  EMBER_CHECK(n >= 0 && options.embedding_dim() >= 0,
              "Embedding: num_embeddings and embedding_dim must not be negative, got ", n, " and ",
              options.embedding_dim());
  if (std::optional<int64_t>& pad = options.padding_idx()) {
    EMBER_CHECK(*pad >= -n && *pad < n,
                "Embedding: padding_idx must be within [-num_embeddings, num_embeddings) = [", -n, ", ", n,
                "), got ", *pad);
    if (*pad < 0) *pad += n;
  }
  weight = register_parameter("weight", empty({n, options.embedding_dim()}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight);
  if (options.padding_idx()) {
    NoGradGuard no_grad;
    weight[*options.padding_idx()].fill_(0);
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  EMBER_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "Embedding: expected indices of dtype int64 or int32, got ", indices.dtype(), " (indices ",
              indices.sizes(), ")");
  EMBER_CHECK(indices.device() == weight.device(), "Embedding: indices are on ", indices.device(),
              " but the weight is on ", weight.device());
  return embedding(weight, indices, options.padding_idx().value_or(-1));
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                     std::optional<int64_t> padding_idx) {
  EMBER_CHECK(
      embeddings.defined() && embeddings.dim() == 2,
      "Embedding::from_pretrained: embeddings must be a 2-D tensor [num_embeddings, embedding_dim], got ",
      embeddings.defined() ? ember::detail::str_cat(embeddings.sizes()) : std::string("an undefined tensor"));
  EMBER_CHECK(embeddings.is_floating_point(),
              "Embedding::from_pretrained: embeddings must be floating point, got ", embeddings.dtype());
  Embedding e(EmbeddingOptions(embeddings.size(0), embeddings.size(1)).padding_idx(padding_idx));
  {
    NoGradGuard no_grad;
    e->weight.set_data(embeddings.detach().clone());
  }
  e->weight.requires_grad_(!freeze);
  return e;
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = ember::detail::str_cat(options.num_embeddings(), ", ", options.embedding_dim());
  if (options.padding_idx()) s += ember::detail::str_cat(", padding_idx=", *options.padding_idx());
  return s;
}

}  // namespace ember::nn
