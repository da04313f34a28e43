// Frontend of embedding: shape, dtype and padding_idx checks, then the device's gather kernel.
#include "ember/core/ops/embedding.h"

#include "ember/core/factories.h"
#include "ember/core/op_registry.h"

namespace ember {

constinit DispatchStub<EmbeddingFn> embedding_stub("embedding");

namespace {
const OpRegistrar registrar({{"embedding", AutocastPolicy::None, true}});
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  EMBER_CHECK(weight.dim() == 2,
              "embedding: expected weight of shape (num_embeddings, embedding_dim), got ",
              weight.sizes());
  EMBER_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "embedding: expected indices of dtype int64 or int32, got ", indices.dtype());
  EMBER_CHECK(indices.device() == weight.device(),
              "embedding: expected indices on the weight's device ", weight.device(), ", got ",
              indices.device());
  int64_t V = weight.size(0), D = weight.size(1);
  EMBER_CHECK(padding_idx >= -1 && padding_idx < V,
              "embedding: padding_idx must be -1 (none) or in [0, ", V, "), got ", padding_idx);
  DimVector shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(D);
  Tensor out = empty(shape, weight.options());
  if (indices.numel() == 0) return out;
  Tensor w = weight.stride(1) == 1 || D <= 1 ? weight : weight.contiguous();
  embedding_stub(weight.device())(out.view({indices.numel(), D}), w,
                                  indices.contiguous().view({indices.numel()}));
  return out;
}

}  // namespace ember
