// Values of softmax, log_softmax, layer_norm, batch_norm, group_norm, dropout and embedding
// against hand-computed numbers and identities, plus every error their frontends raise.
#include <cmath>

#include "ember/core/ops/dropout.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/normalization.h"
#include "ember/core/ops/softmax.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor f64(const NestedList& v) { return tensor(v, kFloat64); }

// The values of t as doubles, in row-major order.
std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

// --- softmax / log_softmax ---

TEST(Softmax, KnownValues) {
  // softmax([1, 2, 3]) = e^i / (e + e^2 + e^3), computed by hand.
  Tensor expected = f64({0.0900305731703805, 0.2447284710547976, 0.6652409557748219});
  EXPECT_CLOSE(softmax(f64({1, 2, 3}), 0), expected);
  EXPECT_CLOSE(softmax(tensor({1.0, 2.0, 3.0}), -1), expected.to(kFloat32));
  EXPECT_CLOSE(tensor({1.0, 2.0, 3.0}).softmax(0), expected.to(kFloat32));
  // log_softmax([1, 2, 3]) = x - log(e + e^2 + e^3) = x - 3.40760596444438.
  EXPECT_CLOSE(log_softmax(f64({1, 2, 3}), 0),
               f64({-2.40760596444438, -1.40760596444438, -0.40760596444438}));
}

TEST(Softmax, LogSoftmaxIsLogOfSoftmaxAndRowsSumToOne) {
  Tensor x = random_tensor({5, 7, 3}, kFloat64, -4, 4);
  for (int64_t dim : {0, 1, 2}) {
    EXPECT_CLOSE(log_softmax(x, dim), log(softmax(x, dim)));
    EXPECT_CLOSE(x.log_softmax(dim), log_softmax(x, dim));
    // Sum over `dim` by an explicit loop.
    Tensor p = softmax(x, dim);
    Tensor total = zeros_like(p.select(dim, 0));
    for (int64_t i = 0; i < x.size(dim); ++i) total += p.select(dim, i);
    EXPECT_CLOSE(total, ones_like(total));
  }
}

TEST(Softmax, InnerAndOuterDimsAgreeWithTheLastDim) {
  // The column kernel (dim not last) against the row kernel on the transposed copy, including
  // an inner size above one column block (256) and non-contiguous input.
  for (DimVector shape : {DimVector{3, 4, 5}, DimVector{2, 6, 300}}) {
    Tensor x = random_tensor(shape, kFloat32, -5, 5);
    Tensor ref = softmax(x.transpose(1, 2).contiguous(), -1).transpose(1, 2);
    EXPECT_CLOSE(softmax(x, 1), ref);
    EXPECT_CLOSE(softmax(non_contiguous(x), 1), ref);
    EXPECT_CLOSE(log_softmax(x, 1), log(ref), Tolerance{1e-5, 1e-5});
  }
}

TEST(Softmax, StableForLargeLogitsAndInfinities) {
  // Shifting the logits leaves softmax unchanged; 1000 would overflow exp in a naive version.
  Tensor x = tensor({1.0, 2.0, 3.0});
  EXPECT_CLOSE(softmax(x + 1000, 0), softmax(x, 0));
  EXPECT_CLOSE(log_softmax(x - 1000, 0), log_softmax(x, 0), Tolerance{1e-6, 1e-4});
  // Exactly 0 for -inf (not a subnormal from a clamped vectorized exp), in both kernels.
  EXPECT_CLOSE(softmax(tensor({-INFINITY, 0.0}), 0), tensor({0.0, 1.0}), Tolerance{0, 0});
  EXPECT_CLOSE(softmax(tensor({{-INFINITY, 1.0}, {0.0, 1.0}}), 0), tensor({{0.0, 0.5}, {1.0, 0.5}}),
               Tolerance{0, 0});
  // A row of -inf has no maximum to subtract: NaN, as in PyTorch.
  std::vector<double> v = values(softmax(tensor({{-INFINITY, -INFINITY}, {0.0, 0.0}}), 1));
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_DOUBLE_EQ(v[2], 0.5);
  std::vector<double> n = values(softmax(tensor({1.0, NAN, 2.0}), 0));
  for (double e : n) EXPECT_TRUE(std::isnan(e));
}

TEST(Softmax, HalfComputesInFloat) {
  Tensor x = random_tensor({4, 33}, kFloat32, -8, 8);
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    Tensor xr = x.to(dt);
    Tensor out = softmax(xr, 1);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_CLOSE(out, softmax(xr.to(kFloat32), 1).to(dt), Tolerance{0, 0});
  }
}

TEST(Softmax, DtypeArgument) {
  Tensor i = tensor({1, 2, 3});
  Tensor out = softmax(i, 0, kFloat64);
  EXPECT_EQ(out.dtype(), kFloat64);
  EXPECT_CLOSE(out, softmax(f64({1, 2, 3}), 0));
  EXPECT_EQ(log_softmax(tensor({1.0, 2.0}), 0, kFloat16).dtype(), kFloat16);
}

TEST(Softmax, ZeroSizeAndZeroDim) {
  EXPECT_EQ(softmax(empty({0, 3}), 1).sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(softmax(empty({3, 0}), 1).numel(), 0);
  EXPECT_CLOSE(softmax(full({}, 5.0), 0), full({}, 1.0));
  EXPECT_CLOSE(log_softmax(full({}, 5.0), -1), full({}, 0.0));
}

TEST(Softmax, Errors) {
  Tensor x = empty({2, 3});
  EXPECT_EMBER_ERROR(softmax(x, 2), "softmax", "dimension out of range", "got 2");
  EXPECT_EMBER_ERROR(log_softmax(x, -3), "log_softmax", "dimension out of range");
  EXPECT_EMBER_ERROR(softmax(tensor({1, 2}), 0), "softmax", "floating point", "int64");
  EXPECT_EMBER_ERROR(log_softmax(tensor({1, 2}), 0, kInt32), "log_softmax", "int32");
}

// --- layer_norm ---

TEST(LayerNorm, KnownValues) {
  // [1, 2, 3]: mean 2, biased var 2/3, so (x - 2) * sqrt(3/2) = [-1.2247449, 0, 1.2247449].
  const double r = std::sqrt(1.5);
  EXPECT_CLOSE(layer_norm(f64({1, 2, 3}), {3}, {}, {}, 0), f64({-r, 0, r}));
  EXPECT_CLOSE(layer_norm(tensor({1.0, 2.0, 3.0}), {3}, {}, {}, 0), tensor({-r, 0.0, r}));
  Tensor w = f64({1, 2, 3}), b = f64({0.5, 0, -1});
  EXPECT_CLOSE(layer_norm(f64({{1, 2, 3}, {6, 4, 2}}), {3}, w, b, 0),
               f64({{0.5 - r, 0, 3 * r - 1}, {r + 0.5, 0, -3 * r - 1}}));
  // A large mean does not cost the float32 variance its accuracy (two passes).
  EXPECT_CLOSE(layer_norm(tensor({10001.0, 10002.0, 10003.0}), {3}, {}, {}, 0),
               tensor({-r, 0.0, r}), Tolerance{1e-4, 1e-4});
}

TEST(LayerNorm, NormalizesTrailingDimsAndReturnsStats) {
  // Over the last two dims of [2, 2, 2]: batch 0 is 1..4 (mean 2.5, var 1.25), batch 1 is 2..8
  // by 2 (mean 5, var 5).
  Tensor x = f64({{{1, 2}, {3, 4}}, {{2, 4}, {6, 8}}});
  auto [out, mean, rstd] = native_layer_norm(x, {2, 2}, {}, {}, 1e-5);
  EXPECT_EQ(mean.sizes().vec(), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_CLOSE(mean, f64({{{2.5}}, {{5.0}}}));
  EXPECT_CLOSE(rstd, f64({{{1 / std::sqrt(1.25 + 1e-5)}}, {{1 / std::sqrt(5 + 1e-5)}}}));
  double a = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_CLOSE(out[0], f64({{-1.5 * a, -0.5 * a}, {0.5 * a, 1.5 * a}}));
  EXPECT_CLOSE(out[1], out[0], Tolerance{1e-5, 1e-5});
  // f16 input keeps f16 output and float32 statistics.
  auto [o16, m16, r16] = native_layer_norm(x.to(kFloat16), {2, 2}, {}, {}, 1e-5);
  EXPECT_EQ(o16.dtype(), kFloat16);
  EXPECT_EQ(m16.dtype(), kFloat32);
}

TEST(LayerNorm, Errors) {
  Tensor x = empty({2, 3});
  EXPECT_EMBER_ERROR(layer_norm(x, {4}), "layer_norm", "[2, 3]",
                     "does not end with normalized_shape [4]");
  EXPECT_EMBER_ERROR(layer_norm(x, {2, 2, 3}), "layer_norm", "normalized_shape [2, 2, 3]");
  EXPECT_EMBER_ERROR(layer_norm(x, {}), "layer_norm", "at least one dim");
  EXPECT_EMBER_ERROR(layer_norm(x, {3}, empty({4})), "layer_norm", "weight of shape [3]",
                     "got [4]");
  EXPECT_EMBER_ERROR(layer_norm(x, {3}, {}, empty({2, 3})), "layer_norm", "bias", "[2, 3]");
  EXPECT_EMBER_ERROR(layer_norm(x, {3}, empty({3}, kInt64)), "layer_norm", "weight", "int64");
  EXPECT_EMBER_ERROR(layer_norm(empty({2, 3}, kInt64), {3}), "layer_norm", "input", "floating");
}

// --- batch_norm ---

TEST(BatchNorm, TrainingUpdatesRunningStatsByHand) {
  // Channel 0: 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3); channel 1: 2, 4, 6, 8
  // (mean 5, biased var 5, unbiased 20/3). momentum 0.1 from (0, 1):
  // running_mean = 0.1 * mean = [0.25, 0.5], running_var = 0.9 + 0.1 * unbiased.
  Tensor x = f64({{1, 2}, {2, 4}, {3, 6}, {4, 8}});
  Tensor rm = f64({0, 0}), rv = f64({1, 1});
  uint32_t version = rm._version();
  Tensor out = batch_norm(x, rm, rv, {}, {}, true, 0.1, 0);
  EXPECT_CLOSE(rm, f64({0.25, 0.5}));
  EXPECT_CLOSE(rv, f64({0.9 + 0.1 * 5.0 / 3, 0.9 + 0.1 * 20.0 / 3}));
  EXPECT_GT(rm._version(), version);
  // Both channels normalize to (k - 2.5) / sqrt(1.25).
  double s = 1 / std::sqrt(1.25);
  EXPECT_CLOSE(
      out,
      f64({{-1.5 * s, -1.5 * s}, {-0.5 * s, -0.5 * s}, {0.5 * s, 0.5 * s}, {1.5 * s, 1.5 * s}}));
  // native_batch_norm returns the batch mean and 1 / sqrt(biased var + eps).
  auto [o, mean, invstd] = native_batch_norm(x, {}, {}, {}, {}, true, 0.1, 0);
  EXPECT_CLOSE(mean, f64({2.5, 5}));
  EXPECT_CLOSE(invstd, f64({s, 1 / std::sqrt(5.0)}));
}

TEST(BatchNorm, EvalUsesRunningStats) {
  // (x - rm) / sqrt(rv) * w + b with rv = [4, 0.25]: [(1 - 0.5) / 2, (2 - 1) / 0.5] = [0.25, 2].
  Tensor x = f64({{1, 2}});
  Tensor rm = f64({0.5, 1}), rv = f64({4, 0.25});
  EXPECT_CLOSE(batch_norm(x, rm, rv, {}, {}, false, 0.1, 0), f64({{0.25, 2}}));
  EXPECT_CLOSE(batch_norm(x, rm, rv, f64({2, 3}), f64({1, -1}), false, 0.1, 0), f64({{1.5, 5}}));
  EXPECT_CLOSE(rm, f64({0.5, 1}));  // untouched in eval
  // float32 running stats with a bfloat16 input (mixed precision).
  Tensor out = batch_norm(x.to(kBFloat16), rm.to(kFloat32), rv.to(kFloat32), {}, {}, false, 0.1, 0);
  EXPECT_EQ(out.dtype(), kBFloat16);
  EXPECT_CLOSE(out, f64({{0.25, 2}}).to(kBFloat16));
}

TEST(BatchNorm, NCHWMatchesAPerChannelLoop) {
  Tensor x = random_tensor({3, 4, 5, 2}, kFloat64);
  Tensor w = random_tensor({4}, kFloat64), b = random_tensor({4}, kFloat64);
  Tensor rm = zeros({4}, kFloat64), rv = ones({4}, kFloat64);
  Tensor out = batch_norm(x, rm, rv, w, b, true, 0.2, 1e-3);
  std::vector<double> xv = values(x), ov = values(out), wv = values(w), bv = values(b);
  std::vector<double> rmv = values(rm), rvv = values(rv);
  for (int64_t c = 0; c < 4; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 10; ++i) sum += xv[(n * 4 + c) * 10 + i];
    double mean = sum / 30;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 10; ++i) sq += std::pow(xv[(n * 4 + c) * 10 + i] - mean, 2);
    double var = sq / 30;
    EXPECT_NEAR(rmv[c], 0.2 * mean, 1e-12);
    EXPECT_NEAR(rvv[c], 0.8 + 0.2 * sq / 29, 1e-12);
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 10; ++i) {
        int64_t k = (n * 4 + c) * 10 + i;
        EXPECT_NEAR(ov[k], (xv[k] - mean) / std::sqrt(var + 1e-3) * wv[c] + bv[c], 1e-12);
      }
  }
}

TEST(BatchNorm, WithoutRunningStats) {
  // Training without running stats normalizes with the batch; so does eval (as PyTorch).
  Tensor x = random_tensor({6, 3, 4}, kFloat32);
  Tensor train = batch_norm(x, {}, {}, {}, {}, true);
  EXPECT_CLOSE(batch_norm(x, {}, {}, {}, {}, false), train);
  Tensor rm = zeros({3}, kFloat32), rv = ones({3}, kFloat32);
  EXPECT_CLOSE(batch_norm(x, rm, rv, {}, {}, true), train);
  EXPECT_EQ(batch_norm(empty({0, 3}), rm, rv, {}, {}, true).numel(), 0);
}

TEST(BatchNorm, Errors) {
  Tensor x = empty({4, 3}), c = empty({3});
  EXPECT_EMBER_ERROR(batch_norm(empty({3}), c, c), "batch_norm", "at least 2 dims", "[3]");
  EXPECT_EMBER_ERROR(batch_norm(x, empty({4}), c), "batch_norm", "running_mean of shape [3]",
                     "got [4]");
  EXPECT_EMBER_ERROR(batch_norm(x, c, empty({2})), "batch_norm", "running_var");
  EXPECT_EMBER_ERROR(batch_norm(x, c, c, empty({4})), "batch_norm", "weight of shape [3]");
  EXPECT_EMBER_ERROR(batch_norm(x, c, c, {}, empty({1})), "batch_norm", "bias");
  EXPECT_EMBER_ERROR(batch_norm(x, c, {}), "batch_norm", "both");
  EXPECT_EMBER_ERROR(batch_norm(empty({1, 3}), c, c, {}, {}, true), "batch_norm",
                     "more than 1 value per channel", "[1, 3]");
  EXPECT_EMBER_ERROR(batch_norm(empty({4, 3}, kInt64), c, c), "batch_norm", "int64");
  EXPECT_EMBER_ERROR(batch_norm(x, empty({3}, kInt64), c), "batch_norm", "running_mean", "int64");
}

// --- group_norm ---

TEST(GroupNorm, KnownValuesAndIdentities) {
  // Channels [1, 2 | 3, 4] in 2 groups: each group has mean +-0.5 around its centre, so with
  // eps 0 every group becomes [-1, 1].
  Tensor x = f64({{{1}, {2}, {3}, {4}}});
  EXPECT_CLOSE(group_norm(x, 2, {}, {}, 0), f64({{{-1}, {1}, {-1}, {1}}}));
  EXPECT_CLOSE(group_norm(x, 2, f64({1, 2, 3, 4}), f64({0, 0, 1, 1}), 0),
               f64({{{-1}, {2}, {-2}, {5}}}));
  // One group is layer_norm over (C, *); C groups normalize each channel alone.
  Tensor y = random_tensor({3, 4, 5}, kFloat64);
  EXPECT_CLOSE(group_norm(y, 1), layer_norm(y, {4, 5}));
  EXPECT_CLOSE(group_norm(y, 4), layer_norm(y, {5}));
  auto [out, mean, rstd] = native_group_norm(y, 2, {}, {}, 1e-5);
  EXPECT_EQ(mean.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_CLOSE(out, layer_norm(y.view({3, 2, 10}), {10}).view({3, 4, 5}));
}

TEST(GroupNorm, Errors) {
  Tensor x = empty({2, 6, 3});
  EXPECT_EMBER_ERROR(group_norm(x, 4), "group_norm", "channels (6)", "num_groups (4)");
  EXPECT_EMBER_ERROR(group_norm(x, 0), "group_norm", "num_groups (0)");
  EXPECT_EMBER_ERROR(group_norm(x, 3, empty({3})), "group_norm", "weight of shape [6]");
  EXPECT_EMBER_ERROR(group_norm(empty({6}), 3), "group_norm", "at least 2 dims");
}

// --- dropout ---

TEST(Dropout, IdentityCases) {
  Tensor x = random_tensor({5, 4}, kFloat32);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_CLOSE(dropout(x, 1.0, true), zeros_like(x), Tolerance{0, 0});
  auto [out, mask] = native_dropout(x, 0.5, false);
  EXPECT_CLOSE(out, x);
  EXPECT_EQ(mask.dtype(), kBool);
}

TEST(Dropout, MaskStatisticsAndScaling) {
  const int64_t n = 200000;
  const double p = 0.3;
  Tensor x = ones({n}, kFloat32);
  auto [out, mask] = native_dropout(x, p, true);
  std::vector<double> o = values(out), m = values(mask);
  int64_t dropped = 0;
  double total = 0;
  const float kept_value = static_cast<float>(1 / (1 - p));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(o[i] == 0 || o[i] == kept_value) << o[i];
    ASSERT_EQ(o[i] != 0, m[i] != 0);
    dropped += o[i] == 0;
    total += o[i];
  }
  // The dropped fraction is Binomial(n, p) / n: standard deviation sqrt(p (1 - p) / n) ~ 0.001.
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.006);
  EXPECT_NEAR(total / n, 1.0, 0.01);  // unbiased: E[out] = x
}

TEST(Dropout, SeedDeterminism) {
  Tensor x = random_tensor({64, 64}, kFloat32);
  manual_seed(11);
  Tensor a = dropout(x, 0.5);
  manual_seed(11);
  Tensor b = dropout(x, 0.5);
  Tensor c = dropout(x, 0.5);
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
  EXPECT_FALSE(assert_close(a, c, Tolerance{0, 0}));
  Generator g1(3), g2(3);
  EXPECT_CLOSE(dropout(x, 0.2, true, &g1), dropout(x, 0.2, true, &g2), Tolerance{0, 0});
  // The mask depends only on the generator, not on the dtype.
  Generator g3(3), g4(3);
  EXPECT_CLOSE(dropout(x.to(kFloat64), 0.2, true, &g3), dropout(x, 0.2, true, &g4).to(kFloat64));
}

TEST(Dropout, Errors) {
  Tensor x = empty({3});
  EXPECT_EMBER_ERROR(dropout(x, 1.5), "dropout", "between 0 and 1", "1.5");
  EXPECT_EMBER_ERROR(native_dropout(x, -0.1), "dropout", "-0.1");
  EXPECT_EMBER_ERROR(dropout(empty({3}, kInt64), 0.5), "dropout", "floating point", "int64");
}

// --- embedding ---

TEST(Embedding, GathersRows) {
  Tensor w = arange(12, kFloat32).view({4, 3});
  Tensor out = embedding(w, tensor({{3, 0}, {1, 1}}));
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_CLOSE(out,
               tensor({{{9.0, 10.0, 11.0}, {0.0, 1.0, 2.0}}, {{3.0, 4.0, 5.0}, {3.0, 4.0, 5.0}}}));
  EXPECT_CLOSE(embedding(w, tensor({2, 0}, kInt32), 0), tensor({{6.0, 7.0, 8.0}, {0.0, 1.0, 2.0}}));
  EXPECT_CLOSE(embedding(w, full({}, 2, kInt64)), tensor({6.0, 7.0, 8.0}));
  // A transposed (non-contiguous) table gathers the same rows as its contiguous copy.
  Tensor wt = arange(12, kFloat64).view({3, 4}).t();
  EXPECT_CLOSE(embedding(wt, tensor({1, 3})), embedding(wt.contiguous(), tensor({1, 3})));
  EXPECT_EQ(embedding(w, empty({0, 2}, kInt64)).sizes().vec(), (std::vector<int64_t>{0, 2, 3}));
}

TEST(Embedding, Errors) {
  Tensor w = zeros({4, 3}, kFloat32);
  EXPECT_EMBER_ERROR(embedding(w, tensor({1, 4})), "embedding", "index 4", "4 rows");
  EXPECT_EMBER_ERROR(embedding(w, tensor({-1})), "embedding", "index -1");
  EXPECT_EMBER_ERROR(embedding(w, tensor({7}, kInt32)), "embedding", "index 7");
  EXPECT_EMBER_ERROR(embedding(zeros({0, 3}, kFloat32), tensor({0})), "embedding", "index 0",
                     "0 rows");
  EXPECT_EMBER_ERROR(embedding(w, tensor({1.0})), "embedding", "int64 or int32", "float32");
  EXPECT_EMBER_ERROR(embedding(zeros({4}, kFloat32), tensor({1})), "embedding",
                     "(num_embeddings, embedding_dim)", "[4]");
  EXPECT_EMBER_ERROR(embedding(w, tensor({1}), 4), "embedding", "padding_idx", "got 4");
  EXPECT_EMBER_ERROR(embedding(w, tensor({1}), -2), "embedding", "padding_idx", "got -2");
}

}  // namespace
}  // namespace ember::testing
