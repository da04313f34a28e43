// Frontend of embedding: shape, dtype and padding_idx checks, then the device's gather kernel.
// Its backward adds gradient rows into the weight's rows (index_add), itself recorded with
// embedding as its backward, so gradients of every order exist.
#include "ember/core/ops/embedding.h"

#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"
#include "ember/core/ops/indexing.h"

namespace ember {

constinit DispatchStub<EmbeddingFn> embedding_stub("embedding");

namespace {

const OpRegistrar registrar({{"embedding", AutocastPolicy::None, true}});

// The weight's gradient [V, D]: row indices[i] receives grad row i (none for padding_idx).
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t V, int64_t padding_idx) {
  int64_t D = grad.size(-1);
  Tensor idx = indices.reshape({-1});
  Tensor rows = grad.reshape({idx.numel(), D});
  if (padding_idx >= 0) rows = rows.masked_fill((idx == padding_idx).unsqueeze(1), 0);
  Tensor out;
  {
    NoGradGuard no_grad;  // recorded below: linear in rows, with embedding as its backward
    out = zeros({V, D}, rows.options());
    index_add_(out, 0, idx, rows);
  }
  if (needs_grad({rows}))
    record("embedding_backward", {rows}, {out},
           [idx](const GradContext& g) -> std::vector<Tensor> { return {embedding(g.grad(), idx)}; });
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  detail::OpRange op_range("embedding", weight, indices);
  EMBER_CHECK(weight.dim() == 2, "embedding: expected weight of shape (num_embeddings, embedding_dim), got ",
              weight.sizes());
  EMBER_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "embedding: expected indices of dtype int64 or int32, got ", indices.dtype());
  EMBER_CHECK(indices.device() == weight.device(), "embedding: expected indices on the weight's device ",
              weight.device(), ", got ", indices.device());
  int64_t V = weight.size(0), D = weight.size(1);
  EMBER_CHECK(padding_idx >= -1 && padding_idx < V, "embedding: padding_idx must be -1 (none) or in [0, ", V,
              "), got ", padding_idx);
  DimVector shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(D);
  Tensor out = empty(shape, weight.options());
  if (indices.numel() > 0) {
    NoGradGuard no_grad;  // recorded below as one op
    Tensor w = weight.stride(1) == 1 || D <= 1 ? weight : weight.contiguous();
    embedding_stub(weight.device())(out.view({indices.numel(), D}), w,
                                    indices.contiguous().view({indices.numel()}));
  }
  if (needs_grad({weight})) {
    SavedTensor si(indices, false);
    record("embedding", {weight}, {out}, [si, V, padding_idx](const GradContext& g) -> std::vector<Tensor> {
      return {embedding_backward(g.grad(), g(si), V, padding_idx)};
    });
  }
  return out;
}

}  // namespace ember
