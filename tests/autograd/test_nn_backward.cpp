// Semantics of the nn backward formulas that gradcheck cannot see (gradients PyTorch defines to
// differ from the true derivative, dtypes, saved tensors), and gradients checked against closed
// forms: d cross_entropy / d logits = softmax - onehot, d bce / d x = sigmoid(x) - t, ...
#include <cmath>
#include <optional>
#include <utility>

#include "core/profiler_test_util.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor leaf(const NestedList& l) { return tensor(l, kFloat64).requires_grad_(); }
Tensor rand_leaf(IntArrayRef sizes, ScalarType dt = kFloat64) {
  return random_tensor(sizes, dt).requires_grad_();
}

TEST(NnBackward, SoftmaxWithADtypeArgumentReturnsTheInputsDtype) {
  Tensor x = rand_leaf({2, 3}, kFloat32);
  Tensor w = tensor({1.0, 2.0, 3.0}, kFloat64);
  (softmax(x, 1, kFloat64) * w).sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  // d/dx_j sum_i w_i softmax_i = s_j (w_j - sum_i w_i s_i).
  Tensor s = softmax(x.detach(), 1, kFloat64);
  EXPECT_CLOSE(x.grad(), (s * (w - (w * s).sum({1}, true))).to(kFloat32));
}

TEST(NnBackward, CrossEntropyGradientIsSoftmaxMinusOneHot) {
  Tensor x = rand_leaf({3, 4});
  Tensor target = tensor({1, 0, 3}, kInt64);
  cross_entropy(x, target).backward();
  Tensor onehot = one_hot(target, 4).to(kFloat64);
  EXPECT_CLOSE(x.grad(), (softmax(x.detach(), 1) - onehot) / 3);
}

TEST(NnBackward, IgnoredTargetsGetNoGradient) {
  Tensor x = rand_leaf({3, 4});
  Tensor target = tensor({1, -100, 3}, kInt64);
  cross_entropy(x, target, {}, -100, "mean", 0.2).backward();
  EXPECT_CLOSE(x.grad()[1], zeros({4}, kFloat64));
  // The mean divides by the 2 counted targets.
  Tensor s = softmax(x.detach()[0], 0);
  Tensor smoothed = tensor({0.05, 0.85, 0.05, 0.05}, kFloat64);  // 0.8 onehot + 0.2 / 4
  EXPECT_CLOSE(x.grad()[0], (s - smoothed) / 2);
}

TEST(NnBackward, AMeanOverNoTargetsIsNaNWithZeroGradient) {
  // As PyTorch's nll_loss backward: ignored targets contribute nothing, even when none is left.
  Tensor x = rand_leaf({2, 3});
  Tensor loss = cross_entropy(x, tensor({1, 1}, kInt64), {}, /*ignore_index=*/1);
  EXPECT_TRUE(std::isnan(loss.item<double>()));
  loss.backward();
  EXPECT_CLOSE(x.grad(), zeros({2, 3}, kFloat64));
}

TEST(NnBackward, WeightedNllLossMeanDividesByTheTargetWeights) {
  Tensor logp = rand_leaf({2, 3});
  Tensor w = tensor({0.5, 2.0, 4.0}, kFloat64);
  nll_loss(logp, tensor({2, 1}, kInt64), w).backward();
  // loss = -(4 logp[0, 2] + 2 logp[1, 1]) / 6
  EXPECT_CLOSE(logp.grad(), tensor({{0.0, 0.0, -4.0 / 6}, {0.0, -2.0 / 6, 0.0}}, kFloat64));
}

TEST(NnBackward, LossWeightsGetNoGradient) {
  Tensor x = rand_leaf({2, 3}), w = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  cross_entropy(x, tensor({0, 2}, kInt64), w).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(NnBackward, MseAndBceGradientsMatchTheirClosedForms) {
  Tensor x = rand_leaf({2, 3}), t = rand_leaf({3});
  mse_loss(x, t).backward();
  Tensor d = x.detach() - t.detach();
  EXPECT_CLOSE(x.grad(), d * 2 / 6);
  EXPECT_CLOSE(t.grad(), -(d * 2 / 6).sum({0}));

  Tensor y = rand_leaf({2, 3}), p = random_tensor({2, 3}, kFloat64, 0, 1).requires_grad_();
  binary_cross_entropy_with_logits(y, p, {}, "sum").backward();
  EXPECT_CLOSE(y.grad(), sigmoid(y.detach()) - p.detach());
  EXPECT_CLOSE(p.grad(), -y.detach());
}

TEST(NnBackward, EmbeddingGradientCountsRowsAndSkipsPadding) {
  Tensor w = rand_leaf({4, 2});
  embedding(w, tensor({{1, 3, 1}, {0, 3, 3}}, kInt64), /*padding_idx=*/3).sum().backward();
  // Row r receives one gradient row per occurrence of r; the padding row none.
  EXPECT_CLOSE(w.grad(), tensor({{1.0, 1.0}, {2.0, 2.0}, {0.0, 0.0}, {0.0, 0.0}}, kFloat64));
}

TEST(NnBackward, DropoutGradientIsTheScaledMask) {
  Tensor x = rand_leaf({4, 5});
  Generator gen(3);
  auto [out, mask] = native_dropout(x, 0.25, true, &gen);
  out.sum().backward();
  EXPECT_CLOSE(x.grad(), mask.to(kFloat64) / 0.75);
  EXPECT_EQ(out.grad_fn()->name(), "native_dropout");
}

// gelu_dropout is dropout(gelu(x)) as one op: the same generator offset and mask, the same values
// and gradient, bit for bit in float64 and float32 (GELU in the compute type either way).
TEST(NnBackward, GeluDropoutIsDropoutOfGelu) {
  for (ScalarType dt : {kFloat64, kFloat32}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor x = random_tensor({6, 33}, dt, -3, 3), gy = random_tensor({6, 33}, dt);
    Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
    Generator ga(9), gb(9);
    Tensor fused = gelu_dropout(a, 0.3, true, &ga), ref = dropout(gelu(b), 0.3, true, &gb);
    EXPECT_EQ(fused.grad_fn()->name(), "gelu_dropout");
    EXPECT_EQ(ga.get_state().offset, gb.get_state().offset);
    EXPECT_CLOSE(fused, ref, Tolerance{0, 0});
    EXPECT_GT((fused == 0).sum().item<int64_t>(), 20);  // about 30% of 198 dropped
    (fused * gy).sum().backward();
    (ref * gy).sum().backward();
    EXPECT_CLOSE(a.grad(), b.grad(), Tolerance{0, 0});
    // Not training, or p = 0: GELU alone.
    EXPECT_CLOSE(gelu_dropout(x, 0.3, false), gelu(x), Tolerance{0, 0});
    EXPECT_CLOSE(gelu_dropout(x, 0), gelu(x), Tolerance{0, 0});
  }
  EXPECT_EMBER_ERROR(gelu_dropout(ones({2}), 1.5), "gelu_dropout", "between 0 and 1");
}

// gelu_dropout packs its mask only for a backward to read: with no gradient to compute, the output
// is all it allocates (1000 floats; the mask would add 125 bytes).
TEST(NnBackward, GeluDropoutKeepsItsMaskOnlyForABackward) {
  auto allocated = [](bool requires_grad) {
    Tensor x = randn({1000}).requires_grad_(requires_grad);
    profiler::ProfileOptions options;
    options.activities = kCpuOnly;
    options.profile_memory = true;
    profiler::Profile prof(options);
    Tensor y = gelu_dropout(x, 0.3);
    prof.stop();
    const profiler::KeyAverages avg = prof.key_averages();
    int64_t bytes = 0;  // allocations are charged to the factories that made them
    for (const profiler::FunctionEventAvg& e : avg.events())
      if (e.key.rfind("ember::empty", 0) == 0) bytes += e.self_cpu_memory_usage;
    return bytes;
  };
  EXPECT_EQ(allocated(true), 4000 + 125);
  EXPECT_EQ(allocated(false), 4000);
  NoGradGuard no_grad;
  EXPECT_EQ(allocated(true), 4000);
}

// Leaf copies of `ts` (undefined stays undefined), each `dt` when given.
std::vector<Tensor> leaves(const std::vector<Tensor>& ts, std::optional<ScalarType> dt = std::nullopt) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts)
    out.push_back(t.defined() ? (dt ? t.to(*dt) : t).detach().clone().requires_grad_() : Tensor());
  return out;
}

// The composite dropout_add_layer_norm stands for, on leaves {x, residual, weight, bias}.
Tensor dropout_add_layer_norm_ref(const std::vector<Tensor>& in, double p, double eps, Generator* gen) {
  return layer_norm(in[1] + dropout(in[0], p, true, gen), {in[0].size(-1)}, in[2], in[3], eps);
}

// dropout_add_layer_norm is layer_norm(residual + dropout(x)) as one op: the same generator offset
// and mask, the values and all four gradients (the statistics summed in another order than
// layer_norm's, so close, not equal). Rows of 13 start inside the mask's 4-element blocks (row r's
// mask from flat index r * 13); [40, 1000] spreads rows and the weight's column sums over tasks.
TEST(NnBackward, DropoutAddLayerNormIsLayerNormOfResidualPlusDropout) {
  for (ScalarType dt : {kFloat64, kFloat32}) {
    for (const DimVector& shape : {DimVector{3, 5, 13}, DimVector{40, 1000}}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " " + ::testing::PrintToString(shape));
      const int64_t N = shape.back();
      Tensor x = random_tensor(shape, dt), gy = random_tensor(shape, dt);
      std::vector<Tensor> in = {x, random_tensor(shape, dt), random_tensor({N}, dt), random_tensor({N}, dt)};
      std::vector<Tensor> a = leaves(in), b = leaves(in);
      Generator ga(9), gb(9);
      Tensor fused = dropout_add_layer_norm(a[0], a[1], a[2], a[3], 0.3, 1e-5, true, &ga);
      Tensor ref = dropout_add_layer_norm_ref(b, 0.3, 1e-5, &gb);
      EXPECT_EQ(fused.grad_fn()->name(), "dropout_add_layer_norm");
      EXPECT_EQ(fused.dtype(), dt);
      EXPECT_EQ(ga.get_state().offset, 1u);
      EXPECT_EQ(gb.get_state().offset, 1u);
      const Tolerance tol = dt == kFloat64 ? Tolerance{1e-12, 1e-12} : default_tolerance(dt);
      EXPECT_CLOSE(fused, ref, tol);
      (fused * gy).sum().backward();
      (ref * gy).sum().backward();
      for (int i = 0; i < 4; ++i) {
        SCOPED_TRACE("gradient of input " + std::to_string(i));
        EXPECT_CLOSE(a[i].grad(), b[i].grad(), tol);
      }
      // x's gradient is zero exactly where native_dropout's mask of the same offset drops.
      Generator gm(9);
      Tensor keep = std::get<1>(native_dropout(x, 0.3, true, &gm));
      EXPECT_CLOSE(a[0].grad().ne(0), keep, Tolerance{0, 0});
      EXPECT_GT(keep.logical_not().sum().item<int64_t>(), x.numel() / 5);  // about 30% dropped
    }
  }
}

// Autocast's residual join: a bf16 sublayer output and a float32 residual stream. The output is
// bf16 (the composite's in float32, rounded), each gradient in its input's dtype.
TEST(NnBackward, DropoutAddLayerNormTakesABf16InputAndAFloat32Residual) {
  const int64_t N = 13;
  Tensor x = random_tensor({6, N}, kBFloat16), gy = random_tensor({6, N}, kBFloat16);
  std::vector<Tensor> in = {x, random_tensor({6, N}, kFloat32), random_tensor({N}, kFloat32),
                            random_tensor({N}, kFloat32)};
  std::vector<Tensor> a = leaves(in), b = leaves(in, kFloat32);
  Generator ga(9), gb(9);
  Tensor fused = dropout_add_layer_norm(a[0], a[1], a[2], a[3], 0.3, 1e-5, true, &ga);
  Tensor ref = dropout_add_layer_norm_ref(b, 0.3, 1e-5, &gb);
  EXPECT_EQ(fused.dtype(), kBFloat16);
  EXPECT_CLOSE(fused, ref.to(kBFloat16));
  (fused * gy).sum().backward();
  (ref * gy.to(kFloat32)).sum().backward();
  EXPECT_EQ(a[0].grad().dtype(), kBFloat16);
  EXPECT_CLOSE(a[0].grad(), b[0].grad().to(kBFloat16));
  for (int i = 1; i < 4; ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    EXPECT_CLOSE(a[i].grad(), b[i].grad());  // float32 in both runs
  }
}

// The backward sums x's gradient over rows for the node before it when that node asks (a linear,
// for its bias gradient): the sums of the gradient it returns, and a linear's bias gradient equal to
// the composite's.
TEST(NnBackward, DropoutAddLayerNormSumsItsInputGradientForTheLinearBeforeIt) {
  Tensor x = random_tensor({3, 5, 8}, kFloat64), res = random_tensor({3, 5, 13}, kFloat64);
  Tensor gy = random_tensor({3, 5, 13}, kFloat64);
  std::vector<Tensor> a = leaves({x, random_tensor({13, 8}, kFloat64), random_tensor({13}, kFloat64)});
  std::vector<Tensor> r = leaves({x, a[1], a[2]});
  const Tensor w = random_tensor({13}, kFloat64);
  RowSumsSeen seen;
  Generator ga(4), gr(4), gs(4);
  Tensor hs = asking_for_row_sums(x.detach().requires_grad_(), &seen);
  (dropout_add_layer_norm(hs, res.narrow(2, 0, 8), w.narrow(0, 0, 8), Tensor(), 0.3, 1e-5, true, &gs) *
   gy.narrow(2, 0, 8))
      .sum()
      .backward();
  ASSERT_TRUE(seen.sums.defined());
  EXPECT_CLOSE(seen.sums, seen.grad.sum({0, 1}), Tolerance{1e-12, 1e-12});
  (dropout_add_layer_norm(nn::functional::linear(a[0], a[1], a[2]), res, w, Tensor(), 0.3, 1e-5, true, &ga) *
   gy)
      .sum()
      .backward();
  Tensor hr = nn::functional::linear(r[0], r[1], r[2]);
  (dropout_add_layer_norm_ref({hr, res, w, Tensor()}, 0.3, 1e-5, &gr) * gy).sum().backward();
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("gradient of linear input " + std::to_string(i));
    EXPECT_CLOSE(a[i].grad(), r[i].grad(), Tolerance{1e-12, 1e-12});
  }
}

// Many bf16 rows: the sums add the input gradient as stored, over every task's rows.
TEST(NnBackward, DropoutAddLayerNormSumsItsStoredBf16InputGradientOverManyRows) {
  Tensor x = random_tensor({1200, 128}, kBFloat16).requires_grad_();
  Tensor res = random_tensor({1200, 128}, kBFloat16), gy = random_tensor({1200, 128}, kBFloat16);
  RowSumsSeen seen;
  Generator gen(5);
  dropout_add_layer_norm(asking_for_row_sums(x, &seen), res, Tensor(), Tensor(), 0.2, 1e-5, true, &gen)
      .backward(gy);
  ASSERT_TRUE(seen.sums.defined());
  EXPECT_CLOSE(seen.sums.to(kFloat64), seen.grad.to(kFloat64).sum({0}), Tolerance{1e-5, 1e-4});
}

// Not training, or p = 0: layer_norm of the plain sum, and no generator offset taken (as dropout,
// so RNG replay agrees with the composite); training with p > 0 takes exactly one.
TEST(NnBackward, DropoutAddLayerNormWithoutDropoutIsLayerNormOfTheSum) {
  Tensor x = random_tensor({4, 13}, kFloat64), res = random_tensor({4, 13}, kFloat64);
  Tensor w = random_tensor({13}, kFloat64), b = random_tensor({13}, kFloat64);
  const Tolerance tol{1e-12, 1e-12};
  Generator gen(9);
  const uint64_t default_offset = default_generator().get_state().offset;
  for (double eps : {1e-5, 0.1}) {
    Tensor expect = layer_norm(res + x, {13}, w, b, eps);
    EXPECT_CLOSE(dropout_add_layer_norm(x, res, w, b, 0.3, eps, false, &gen), expect, tol);
    EXPECT_CLOSE(dropout_add_layer_norm(x, res, w, b, 0, eps, true, &gen), expect, tol);
    EXPECT_CLOSE(dropout_add_layer_norm(x, res, w, b, 0.3, eps, false), expect, tol);
    EXPECT_CLOSE(dropout_add_layer_norm(x, res, w, b, 0, eps), expect, tol);
  }
  EXPECT_EQ(gen.get_state().offset, 0u);
  EXPECT_EQ(default_generator().get_state().offset, default_offset);
  // The gradients too, in eval mode.
  std::vector<Tensor> a = leaves({x, res, w, b}), r = leaves({x, res, w, b});
  Tensor gy = random_tensor({4, 13}, kFloat64);
  (dropout_add_layer_norm(a[0], a[1], a[2], a[3], 0.3, 1e-5, false, &gen) * gy).sum().backward();
  (layer_norm(r[1] + r[0], {13}, r[2], r[3]) * gy).sum().backward();
  for (int i = 0; i < 4; ++i) EXPECT_CLOSE(a[i].grad(), r[i].grad(), tol) << "gradient of input " << i;
  EXPECT_EQ(gen.get_state().offset, 0u);
  dropout_add_layer_norm(x, res, w, b, 0.3, 1e-5, true, &gen);
  EXPECT_EQ(gen.get_state().offset, 1u);
}

// Rows longer than the fused kernels take (8192) run as the composite, under the same contract:
// the mask, one offset, the values and gradients; x's dtype out for a bf16 x with a float32
// residual, each gradient in its input's dtype.
TEST(NnBackward, DropoutAddLayerNormOnRowsLongerThanTheFusedKernels) {
  const int64_t N = 8200;
  std::vector<Tensor> in = {random_tensor({2, N}, kFloat64), random_tensor({2, N}, kFloat64),
                            random_tensor({N}, kFloat64), random_tensor({N}, kFloat64)};
  std::vector<Tensor> a = leaves(in), b = leaves(in);
  Generator ga(9), gb(9);
  Tensor fused = dropout_add_layer_norm(a[0], a[1], a[2], a[3], 0.3, 1e-5, true, &ga);
  Tensor ref = dropout_add_layer_norm_ref(b, 0.3, 1e-5, &gb);
  EXPECT_EQ(ga.get_state().offset, 1u);
  EXPECT_CLOSE(fused, ref, Tolerance{1e-12, 1e-12});
  Tensor gy = random_tensor({2, N}, kFloat64);
  (fused * gy).sum().backward();
  (ref * gy).sum().backward();
  for (int i = 0; i < 4; ++i)
    EXPECT_CLOSE(a[i].grad(), b[i].grad(), Tolerance{1e-12, 1e-12}) << "input " << i;

  std::vector<Tensor> m =
      leaves({in[0].to(kBFloat16), in[1].to(kFloat32), in[2].to(kFloat32), in[3].to(kFloat32)});
  Tensor out = dropout_add_layer_norm(m[0], m[1], m[2], m[3], 0.3);
  EXPECT_EQ(out.dtype(), kBFloat16);
  out.sum().backward();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m[i].grad().dtype(), m[i].dtype()) << "input " << i;
}

// weight and bias are optional, apart or together, as layer_norm's.
TEST(NnBackward, DropoutAddLayerNormWithoutWeightOrBias) {
  Tensor x = random_tensor({5, 13}, kFloat64), res = random_tensor({5, 13}, kFloat64);
  Tensor w = random_tensor({13}, kFloat64), b = random_tensor({13}, kFloat64),
         gy = random_tensor({5, 13}, kFloat64);
  for (auto [weight, bias] :
       {std::pair{Tensor(), Tensor()}, std::pair{w, Tensor()}, std::pair{Tensor(), b}}) {
    SCOPED_TRACE(std::string("weight ") + (weight.defined() ? "given" : "none") + ", bias " +
                 (bias.defined() ? "given" : "none"));
    std::vector<Tensor> a = leaves({x, res, weight, bias}), r = leaves({x, res, weight, bias});
    Generator ga(4), gb(4);
    Tensor fused = dropout_add_layer_norm(a[0], a[1], a[2], a[3], 0.5, 1e-5, true, &ga);
    Tensor ref = dropout_add_layer_norm_ref(r, 0.5, 1e-5, &gb);
    EXPECT_CLOSE(fused, ref, Tolerance{1e-12, 1e-12});
    (fused * gy).sum().backward();
    (ref * gy).sum().backward();
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(a[i].defined(), r[i].defined());
      if (a[i].defined()) {
        EXPECT_CLOSE(a[i].grad(), r[i].grad(), Tolerance{1e-12, 1e-12}) << "input " << i;
      }
    }
  }
}

TEST(NnBackward, DropoutAddLayerNormErrorsNameTheOp) {
  const char* op = "dropout_add_layer_norm";
  Tensor x = ones({2, 3}), res = ones({2, 3});
  for (double p : {1.5, -0.1, std::nan("")})
    EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, res, {}, {}, p), op, "between 0 and 1");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, ones({3, 2}), {}, {}, 0.1), op, "residual", "does not match");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, ones({3}), {}, {}, 0.1), op, "residual", "does not match");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(ones({2, 3}, kInt64), res, {}, {}, 0.1), op, "input",
                     "floating point");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, ones({2, 3}, kInt64), {}, {}, 0.1), op, "residual",
                     "floating point");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, res, ones({2}), {}, 0.1), op, "weight", "shape");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, res, ones({2, 3}), {}, 0.1), op, "weight", "shape");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(x, res, {}, ones({4}), 0.1), op, "bias", "shape");
  EXPECT_EMBER_ERROR(dropout_add_layer_norm(ones({}), ones({}), {}, {}, 0.1), op, "at least one dim");
}

TEST(NnBackward, NormsAreInvariantToShiftingTheirGroups) {
  // Normalized outputs do not change when a whole group shifts, so every gradient of x sums to
  // zero over a group; the bias gradient is the sum of the output gradient.
  Tensor x = rand_leaf({2, 3, 4}), g = random_tensor({2, 3, 4}, kFloat64);
  Tensor b = rand_leaf({4});
  (layer_norm(x, {4}, {}, b) * g).sum().backward();
  EXPECT_CLOSE(x.grad().sum({2}), zeros({2, 3}, kFloat64), Tolerance{0, 1e-12});
  EXPECT_CLOSE(b.grad(), g.sum({0, 1}));

  Tensor y = rand_leaf({2, 3, 4});
  (batch_norm(y, {}, {}, {}, {}, true) * g).sum().backward();
  EXPECT_CLOSE(y.grad().sum({0, 2}), zeros({3}, kFloat64), Tolerance{0, 1e-12});

  Tensor z = rand_leaf({2, 4, 3});
  (group_norm(z, 2) * g.view({2, 4, 3})).sum().backward();
  EXPECT_CLOSE(z.grad().view({2, 2, 6}).sum({2}), zeros({2, 2}, kFloat64), Tolerance{0, 1e-12});
}

TEST(NnBackward, BatchNormWithRunningStatsIsAffine) {
  Tensor x = rand_leaf({3, 2}), w = leaf({2.0, -1.0});
  Tensor rm = tensor({0.5, 1.0}, kFloat64), rv = tensor({4.0, 0.25}, kFloat64);
  batch_norm(x, rm, rv, w, {}, false, 0.1, 0.0).sum().backward();
  // d/dx = w / sqrt(running_var); d/dw = sum (x - running_mean) / sqrt(running_var).
  EXPECT_CLOSE(x.grad(), tensor({1.0, -2.0}, kFloat64).expand({3, 2}).contiguous());
  EXPECT_CLOSE(w.grad(), ((x.detach() - rm) / rv.sqrt()).sum({0}));
}

TEST(NnBackward, ReducedPrecisionNormsAndLossesGetGradientsInTheirDtype) {
  for (ScalarType dt : {kFloat16, kBFloat16, kFloat32}) {
    SCOPED_TRACE(to_string(dt));
    Tensor x = rand_leaf({4, 6}, dt);
    Tensor w = ones({6}, dt).requires_grad_();
    cross_entropy(layer_norm(x, {6}, w), tensor({0, 5, 2, 1}, kInt64)).backward();
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_EQ(w.grad().dtype(), dt);
    Tensor x64 = x.detach().to(kFloat64).requires_grad_();
    cross_entropy(layer_norm(x64, {6}), tensor({0, 5, 2, 1}, kInt64)).backward();
    // The forward rounds its output to dt before the loss sees it.
    Tolerance tol = dt == kFloat32 ? default_tolerance(dt) : Tolerance{0.05, 2e-3};
    EXPECT_CLOSE(x.grad(), x64.grad().to(dt), tol);
  }
}

TEST(NnBackward, ModifyingSavedStatisticsInPlaceIsCaught) {
  Tensor x = rand_leaf({2, 3});
  auto [out, mean, rstd] = native_layer_norm(x, {3}, {}, {}, 1e-5);
  mean.add_(1);
  EXPECT_EMBER_ERROR(out.sum().backward(), "modified by an inplace operation", "layer_norm");
}

// softmax(q k^T * scale + mask) v with differentiable ember ops: the reference for the fused
// forward's recorded backward.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                           double scale) {
  Tensor s = q.matmul(k.mT()) * scale;
  if (mask.defined()) s = s + mask;
  return softmax(s, -1).matmul(v);
}

TEST(NnBackward, AttentionGradientsMatchTheComposite) {
  std::vector<Tensor> in = {rand_leaf({2, 3, 4}), rand_leaf({1, 5, 4}), rand_leaf({5, 2}), rand_leaf({3, 5})};
  Tensor g = random_tensor({2, 3, 2}, kFloat64);
  auto grads = [&](bool fused) {
    Tensor out = fused ? scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, false, 0.3)
                       : attention_reference(in[0], in[1], in[2], in[3], 0.3);
    return autograd::grad({out}, in, {g});
  };
  std::vector<Tensor> fused = grads(true), reference = grads(false);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_CLOSE(fused[i], reference[i]);
}

TEST(NnBackward, AttentionMasksAndDropout) {
  // A boolean mask blocks the gradient to keys it hides; dropout under grad mode still trains.
  Tensor q = rand_leaf({2, 3}), k = rand_leaf({4, 3}), v = rand_leaf({4, 2});
  Tensor mask = tensor({{true, true, false, true}, {true, false, false, true}});
  scaled_dot_product_attention(q, k, v, mask).sum().backward();
  EXPECT_CLOSE(k.grad()[2], zeros({3}, kFloat64));
  EXPECT_CLOSE(v.grad()[2], zeros({2}, kFloat64));

  Tensor q2 = rand_leaf({2, 3, 4}, kFloat32);
  Tensor out = scaled_dot_product_attention(q2, q2, q2, {}, 0.5, true);
  EXPECT_EQ(out.dtype(), kFloat32);
  out.sum().backward();
  EXPECT_EQ(q2.grad().dtype(), kFloat32);
  EXPECT_TRUE((q2.grad().abs() < 1e30).all().item<bool>());  // finite, no NaN
}

}  // namespace
}  // namespace ember::testing
