// scaled_dot_product_attention against a composite reference built from ember's elementwise
// ops and explicit loops over the key and feature dims, plus its dropout and error paths.
#include <cmath>

#include "ember/core/ops/attention.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// softmax(q k^T * scale + bias) v with bias [..., L, S] (0 or -inf entries for masks), written
// with slices, broadcasting and elementwise ops only.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                           double scale) {
  int64_t E = q.size(-1), S = k.size(-2);
  // scores[..., i, j] = sum_e q[..., i, e] * k[..., j, e]
  Tensor scores = q.select(-1, 0).unsqueeze(-1) * k.select(-1, 0).unsqueeze(-2);
  for (int64_t e = 1; e < E; ++e)
    scores = scores + q.select(-1, e).unsqueeze(-1) * k.select(-1, e).unsqueeze(-2);
  scores = scores * scale + bias;
  Tensor m = scores.select(-1, 0);
  for (int64_t j = 1; j < S; ++j) m = maximum(m, scores.select(-1, j));
  Tensor p = exp(scores - m.unsqueeze(-1));
  Tensor total = p.select(-1, 0);
  for (int64_t j = 1; j < S; ++j) total = total + p.select(-1, j);
  p = p / total.unsqueeze(-1);
  // out[..., i, :] = sum_j p[..., i, j] * v[..., j, :]
  Tensor out = p.select(-1, 0).unsqueeze(-1) * v.select(-2, 0).unsqueeze(-2);
  for (int64_t j = 1; j < S; ++j)
    out = out + p.select(-1, j).unsqueeze(-1) * v.select(-2, j).unsqueeze(-2);
  return out;
}

Tensor bias_from_bool(const Tensor& mask) {
  return where(mask, zeros({}, kFloat64), full({}, -INFINITY, kFloat64));
}

TEST(Attention, MatchesCompositeReference) {
  Tensor q = random_tensor({2, 3, 4, 5}, kFloat64), k = random_tensor({2, 3, 6, 5}, kFloat64);
  Tensor v = random_tensor({2, 3, 6, 7}, kFloat64);
  double scale = 1 / std::sqrt(5.0);
  Tensor ref = reference_attention(q, k, v, zeros({}, kFloat64), scale);
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v), ref);
  EXPECT_CLOSE(scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32)),
               ref.to(kFloat32), Tolerance{1e-5, 1e-5});
  EXPECT_CLOSE(scaled_dot_product_attention(q.to(kBFloat16), k.to(kBFloat16), v.to(kBFloat16)),
               reference_attention(q.to(kBFloat16).to(kFloat64), k.to(kBFloat16).to(kFloat64),
                                   v.to(kBFloat16).to(kFloat64), zeros({}, kFloat64), scale)
                   .to(kBFloat16));
  // A custom scale, and a [B, L, H, E] layout transposed to [B, H, L, E] (strided rows).
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v, {}, 0, false, 0.7),
               reference_attention(q, k, v, zeros({}, kFloat64), 0.7));
  Tensor qt = q.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_CLOSE(scaled_dot_product_attention(qt, k, v), ref);
}

TEST(Attention, Masks) {
  Tensor q = random_tensor({2, 70, 4}, kFloat64), k = random_tensor({2, 9, 4}, kFloat64);
  Tensor v = random_tensor({2, 9, 3}, kFloat64);
  double scale = 0.5;
  // Float mask broadcast over the batch; more than one block of 64 queries.
  Tensor fm = random_tensor({70, 9}, kFloat64);
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v, fm, 0, false, scale),
               reference_attention(q, k, v, fm, scale));
  // Bool mask (true = attend) with key 0 always allowed, so no row is fully masked.
  Tensor bm = random_tensor({2, 70, 9}, kBool);
  bm.select(-1, 0).fill_(true);
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v, bm, 0, false, scale),
               reference_attention(q, k, v, bias_from_bool(bm), scale));
  // is_causal: query i sees keys j <= i, the same as an explicit lower-triangular mask.
  Tensor causal = arange(9, kInt64).unsqueeze(0) <= arange(70, kInt64).unsqueeze(1);
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v, {}, 0, true, scale),
               reference_attention(q, k, v, bias_from_bool(causal), scale));
  // A float32 query with a float64 additive mask.
  EXPECT_CLOSE(scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32), fm, 0,
                                            false, scale),
               reference_attention(q, k, v, fm, scale).to(kFloat32), Tolerance{1e-5, 1e-5});
}

TEST(Attention, FullyMaskedRowIsNaN) {
  // As PyTorch's math backend: softmax over all -inf is NaN. The other rows are unaffected.
  Tensor q = random_tensor({2, 3}, kFloat32), k = random_tensor({4, 3}, kFloat32),
         v = random_tensor({4, 2}, kFloat32);
  Tensor mask = tensor({{true, true, false, false}, {false, false, false, false}});
  Tensor out = scaled_dot_product_attention(q, k, v, mask);
  EXPECT_TRUE(std::isnan(out[1][0].item<double>()));
  EXPECT_FALSE(std::isnan(out[0][0].item<double>()));
}

TEST(Attention, BroadcastBatchAndEmptySizes) {
  // Keys and values shared across heads: [3, 6, 5] and [1, 6, 5] against queries [2, 3, 4, 5].
  Tensor q = random_tensor({2, 3, 4, 5}, kFloat64), k = random_tensor({3, 6, 5}, kFloat64);
  Tensor v = random_tensor({1, 6, 5}, kFloat64);
  Tensor out = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_CLOSE(out, reference_attention(q, k, v, zeros({}, kFloat64), 1 / std::sqrt(5.0)));
  // No keys: the empty weighted sum is 0. No queries: an empty result.
  EXPECT_CLOSE(scaled_dot_product_attention(zeros({2, 3, 4}, kFloat32), zeros({2, 0, 4}, kFloat32),
                                            zeros({2, 0, 3}, kFloat32)),
               zeros({2, 3, 3}, kFloat32));
  EXPECT_EQ(scaled_dot_product_attention(zeros({2, 0, 4}, kFloat32), zeros({2, 5, 4}, kFloat32),
                                         zeros({2, 5, 3}, kFloat32))
                .numel(),
            0);
}

TEST(Attention, Dropout) {
  // q = k = 0 gives uniform weights 1/S; with v = 1 each output is (kept keys / S) / (1 - p),
  // whose mean over many queries is 1.
  const int64_t L = 256, S = 256;
  Tensor q = zeros({4, L, 8}, kFloat32), k = zeros({4, S, 8}, kFloat32),
         v = ones({4, S, 1}, kFloat32);
  manual_seed(5);
  Tensor a = scaled_dot_product_attention(q, k, v, {}, 0.4);
  manual_seed(5);
  Tensor b = scaled_dot_product_attention(q, k, v, {}, 0.4);
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
  Tensor c = a.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  double total = 0;
  bool varies = false;
  for (int64_t i = 0; i < c.numel(); ++i) {
    total += p[i];
    varies = varies || p[i] != p[0];
  }
  EXPECT_TRUE(varies);
  EXPECT_NEAR(total / static_cast<double>(c.numel()), 1.0, 0.01);
  EXPECT_CLOSE(scaled_dot_product_attention(q, k, v, {}, 1.0), zeros({4, L, 1}, kFloat32));
}

TEST(Attention, Errors) {
  Tensor q = zeros({2, 4, 8}, kFloat32), k = zeros({2, 6, 8}, kFloat32),
         v = zeros({2, 6, 3}, kFloat32);
  const char* op = "scaled_dot_product_attention";
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, v, zeros({4, 6}, kBool), 0, true), op,
                     "is_causal");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k.to(kFloat64), v), op, "same dtype",
                     "float64");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, zeros({2, 6, 7}, kFloat32), v), op,
                     "[2, 6, 7]");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, zeros({2, 5, 3}, kFloat32)), op,
                     "[2, 5, 3]");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, zeros({3, 6, 8}, kFloat32), v), op,
                     "cannot be broadcast");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, v, zeros({5, 6}, kBool)), op,
                     "attn_mask of shape [5, 6]");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, v, zeros({4, 6}, kInt64)), op, "attn_mask",
                     "int64");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(zeros({8}, kFloat32), k, v), op, "query",
                     "at least 2 dims");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(q, k, v, {}, 1.5), op, "dropout_p", "1.5");
  EXPECT_EMBER_ERROR(scaled_dot_product_attention(zeros({2, 4, 8}, kInt64), k, v), op, "query",
                     "int64");
}

}  // namespace
}  // namespace ember::testing
