// Values of the losses against hand-computed numbers, PyTorch's documented semantics
// (weighted means, ignore_index, label smoothing, probability targets) and formulas evaluated
// in double, plus every error the frontends raise.
#include <cmath>

#include "ember/core/ops/loss.h"
#include "ember/core/ops/softmax.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor f64(const NestedList& v) { return tensor(v, kFloat64); }
Tensor scalar64(double v) { return full({}, v, kFloat64); }

// -log_softmax([1, 2, 3]) = log(e + e^2 + e^3) - x = 3.40760596444438 - x.
constexpr double kLse123 = 3.40760596444438;

TEST(CrossEntropy, UniformLogitsGiveLogC) {
  for (int64_t C : {2, 5, 1000}) {
    Tensor x = zeros({4, C}, kFloat32);
    Tensor t = tensor({0, 1, 0, 1});
    EXPECT_CLOSE(cross_entropy(x, t), full({}, std::log(static_cast<double>(C)), kFloat32));
    EXPECT_CLOSE(cross_entropy(x, t, {}, -100, "sum"),
                 full({}, 4 * std::log(static_cast<double>(C)), kFloat32));
    EXPECT_CLOSE(cross_entropy(x, t, {}, -100, "none"),
                 full({4}, std::log(static_cast<double>(C)), kFloat32));
  }
}

TEST(CrossEntropy, HandExamples) {
  Tensor x = f64({{1, 2, 3}, {1, 2, 3}});
  Tensor t = tensor({2, 0});
  // Per row: -log_softmax at the target: 3.4076 - 3 and 3.4076 - 1.
  EXPECT_CLOSE(cross_entropy(x, t, {}, -100, "none"), f64({kLse123 - 3, kLse123 - 1}));
  EXPECT_CLOSE(cross_entropy(x, t), scalar64((2 * kLse123 - 4) / 2));
  // Class weights [1, 2, 3]: losses 3 * 0.4076 and 1 * 2.4076; the mean divides by 3 + 1.
  Tensor w = f64({1, 2, 3});
  EXPECT_CLOSE(cross_entropy(x, t, w, -100, "none"), f64({3 * (kLse123 - 3), kLse123 - 1}));
  EXPECT_CLOSE(cross_entropy(x, t, w), scalar64((3 * (kLse123 - 3) + kLse123 - 1) / 4));
  EXPECT_CLOSE(cross_entropy(x, t, w, -100, "sum"), scalar64(3 * (kLse123 - 3) + kLse123 - 1));
  // A 1-D input is one sample with a 0-dim target.
  EXPECT_CLOSE(cross_entropy(f64({1, 2, 3}), full({}, 0, kInt64)), scalar64(kLse123 - 1));
}

TEST(CrossEntropy, IgnoreIndex) {
  Tensor x = f64({{1, 2, 3}, {0, 0, 0}, {1, 2, 3}});
  Tensor t = tensor({2, -100, 0});
  // The ignored row contributes 0 and is left out of the mean's denominator.
  EXPECT_CLOSE(cross_entropy(x, t, {}, -100, "none"), f64({kLse123 - 3, 0, kLse123 - 1}));
  EXPECT_CLOSE(cross_entropy(x, t), scalar64((2 * kLse123 - 4) / 2));
  // ignore_index may be a valid class; weights of ignored rows are left out too.
  Tensor w = f64({1, 2, 3});
  EXPECT_CLOSE(cross_entropy(x, tensor({2, 1, 0}), w, 1),
               scalar64((3 * (kLse123 - 3) + kLse123 - 1) / 4));
  // Everything ignored: the mean is 0 / 0 = NaN, the sum 0 (as PyTorch).
  Tensor all_ignored = tensor({-100, -100, -100});
  EXPECT_TRUE(std::isnan(cross_entropy(x, all_ignored).item<double>()));
  EXPECT_EQ(cross_entropy(x, all_ignored, {}, -100, "sum").item<double>(), 0);
}

TEST(CrossEntropy, LabelSmoothing) {
  // ls = 0.1, C = 3, target 2: (1 - 0.1) * 0.4076 + 0.1 / 3 * (2.4076 + 1.4076 + 0.4076), i.e.
  // the cross entropy against q = [1/30, 1/30, 0.9 + 1/30].
  double nll = kLse123 - 3, smooth = 3 * kLse123 - 6;
  double expected = 0.9 * nll + 0.1 / 3 * smooth;
  EXPECT_NEAR(expected, 0.50760596444438, 1e-12);
  Tensor x = f64({{1, 2, 3}});
  EXPECT_CLOSE(cross_entropy(x, tensor({2}), {}, -100, "mean", 0.1), scalar64(expected));
  // Weighted, with an ignored row: the smoothing term weights each class's log-probability and
  // both terms of the mean divide by the target weights (PyTorch's LossNLL.cpp).
  Tensor x2 = f64({{1, 2, 3}, {3, 2, 1}, {0, 0, 0}});
  Tensor t2 = tensor({2, 0, -100});
  Tensor w = f64({1, 2, 3});
  double nll0 = 3 * (kLse123 - 3), nll1 = 1 * (kLse123 - 3);
  // sum_c w_c * -logp_c: row 0 -> 1*2.4076 + 2*1.4076 + 3*0.4076; row 1 reversed.
  double sm0 = 1 * (kLse123 - 1) + 2 * (kLse123 - 2) + 3 * (kLse123 - 3);
  double sm1 = 1 * (kLse123 - 3) + 2 * (kLse123 - 2) + 3 * (kLse123 - 1);
  double ls = 0.3;
  Tensor none = cross_entropy(x2, t2, w, -100, "none", ls);
  EXPECT_CLOSE(none, f64({(1 - ls) * nll0 + ls / 3 * sm0, (1 - ls) * nll1 + ls / 3 * sm1, 0}));
  EXPECT_CLOSE(cross_entropy(x2, t2, w, -100, "mean", ls),
               scalar64(((1 - ls) * (nll0 + nll1) + ls / 3 * (sm0 + sm1)) / (3 + 1)));
  EXPECT_CLOSE(cross_entropy(x2, t2, w, -100, "sum", ls),
               scalar64((1 - ls) * (nll0 + nll1) + ls / 3 * (sm0 + sm1)));
}

TEST(CrossEntropy, ProbabilityTargets) {
  Tensor x = random_tensor({4, 5}, kFloat64);
  Tensor t = tensor({3, 0, 4, 3});
  Tensor onehot = zeros({4, 5}, kFloat64);
  for (int64_t i = 0; i < 4; ++i) onehot[i][t[i].item<int64_t>()].fill_(1);
  // One-hot probabilities are the class indices, label smoothing included.
  EXPECT_CLOSE(cross_entropy(x, onehot, {}, -100, "none"), cross_entropy(x, t, {}, -100, "none"));
  EXPECT_CLOSE(cross_entropy(x, onehot, {}, -100, "mean", 0.2),
               cross_entropy(x, t, {}, -100, "mean", 0.2));
  // With class weights the probability form's mean divides by N, not by the weights.
  Tensor w = f64({1, 2, 3, 4, 5});
  Tensor none = cross_entropy(x, t, w, -100, "none");
  EXPECT_CLOSE(cross_entropy(x, onehot, w, -100, "none"), none);
  double total = 0;
  for (int64_t i = 0; i < 4; ++i) total += none[i].item<double>();
  EXPECT_CLOSE(cross_entropy(x, onehot, w), scalar64(total / 4));
  // A soft target: -sum_c q_c log_softmax(x)_c, by hand for x = [1, 2, 3], q = [0.5, 0.25, 0.25].
  EXPECT_CLOSE(cross_entropy(f64({{1, 2, 3}}), f64({{0.5, 0.25, 0.25}})),
               scalar64(0.5 * (kLse123 - 1) + 0.25 * (kLse123 - 2) + 0.25 * (kLse123 - 3)));
  EXPECT_TRUE(std::isnan(cross_entropy(empty({0, 3}), empty({0, 3})).item<double>()));
}

TEST(CrossEntropy, SpatialMatchesFlattened) {
  // (N, C, d) against (N * d, C) with the class dim moved last.
  Tensor x = random_tensor({2, 3, 4}, kFloat64);
  Tensor t = randint(0, 3, {2, 4});
  Tensor flat_x = x.permute({0, 2, 1}).reshape({8, 3});
  Tensor w = f64({0.5, 1, 2});
  EXPECT_CLOSE(cross_entropy(x, t, w, -100, "none", 0.1),
               cross_entropy(flat_x, t.reshape({8}), w, -100, "none", 0.1).view({2, 4}));
  EXPECT_CLOSE(cross_entropy(x, t, w), cross_entropy(flat_x, t.reshape({8}), w));
}

TEST(NllLoss, Values) {
  Tensor lp = f64({{-1, -2, -3}, {-0.5, -1.5, -2.5}});
  EXPECT_CLOSE(nll_loss(lp, tensor({1, 2}), {}, -100, "none"), f64({2, 2.5}));
  EXPECT_CLOSE(nll_loss(lp, tensor({1, 2})), scalar64(2.25));
  EXPECT_CLOSE(nll_loss(lp, tensor({1, 2}), f64({1, 3, 0.5})), scalar64((3 * 2 + 0.5 * 2.5) / 3.5));
  EXPECT_CLOSE(nll_loss(lp, tensor({1, 0}), {}, 0, "sum"), scalar64(2));
  // cross_entropy is nll_loss of log_softmax.
  Tensor x = random_tensor({6, 4}, kFloat32);
  Tensor t = randint(0, 4, {6});
  EXPECT_CLOSE(cross_entropy(x, t), nll_loss(log_softmax(x, 1), t));
  // float16 input: float16 result, computed in float.
  EXPECT_EQ(nll_loss(lp.to(kFloat16), tensor({1, 2})).dtype(), kFloat16);
}

TEST(MseLoss, Values) {
  Tensor a = f64({1, 2, 3}), b = f64({1, 0, 0});
  EXPECT_CLOSE(mse_loss(a, b, "none"), f64({0, 4, 9}));
  EXPECT_CLOSE(mse_loss(a, b, "sum"), scalar64(13));
  EXPECT_CLOSE(mse_loss(a, b), scalar64(13.0 / 3));
  // Broadcast: [[1, 2, 3]] against [[0], [1]] gives [[1, 4, 9], [0, 1, 4]].
  EXPECT_CLOSE(mse_loss(f64({{1, 2, 3}}), f64({{0}, {1}}), "sum"), scalar64(19));
  EXPECT_TRUE(std::isnan(mse_loss(empty({0}), empty({0})).item<double>()));
}

// max(x, 0) - x t + log(1 + exp(-|x|)): the textbook stable form, evaluated in double.
double bce_reference(double x, double t) {
  return std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
}

TEST(BceWithLogits, LargeLogitsDoNotOverflow) {
  std::vector<double> xs = {-100, -30, -2.5, 0, 1, 30, 100}, ts = {1, 0, 0.3, 0.5, 1, 1, 0};
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor x = tensor(xs, dt), t = tensor(ts, dt);
    Tensor out = binary_cross_entropy_with_logits(x, t, {}, "none");
    std::vector<double> expected;
    for (size_t i = 0; i < xs.size(); ++i) expected.push_back(bce_reference(xs[i], ts[i]));
    EXPECT_CLOSE(out, tensor(expected, kFloat64).to(dt));
    double sum = 0;
    for (double e : expected) sum += e;
    EXPECT_CLOSE(binary_cross_entropy_with_logits(x, t), full({}, sum / 7, kFloat64).to(dt));
  }
}

TEST(BceWithLogits, WeightAndPosWeight) {
  // -(w (pw t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))), the definition, in double.
  std::vector<double> xs = {-2, 0.5, 3, -0.3}, ts = {0, 1, 0.7, 0.2};
  std::vector<double> w = {1, 2}, pw = {3, 0.5};
  std::vector<double> expected;
  for (size_t i = 0; i < 4; ++i) {
    double s = 1 / (1 + std::exp(-xs[i]));
    expected.push_back(-w[i % 2] *
                       (pw[i % 2] * ts[i] * std::log(s) + (1 - ts[i]) * std::log(1 - s)));
  }
  Tensor x = tensor(xs, kFloat64).view({2, 2}), t = tensor(ts, kFloat64).view({2, 2});
  Tensor out =
      binary_cross_entropy_with_logits(x, t, tensor(w, kFloat64), "none", tensor(pw, kFloat64));
  EXPECT_CLOSE(out, tensor(expected, kFloat64).view({2, 2}));
  EXPECT_CLOSE(
      binary_cross_entropy_with_logits(x, t, tensor(w, kFloat64), "sum", tensor(pw, kFloat64)),
      scalar64(expected[0] + expected[1] + expected[2] + expected[3]));
}

TEST(Losses, InvalidReduction) {
  Tensor x = zeros({2, 3}, kFloat32), t = tensor({0, 1});
  EXPECT_EMBER_ERROR(cross_entropy(x, t, {}, -100, "avg"), "cross_entropy",
                     "'none', 'mean' or 'sum'", "'avg'");
  EXPECT_EMBER_ERROR(nll_loss(x, t, {}, -100, "Mean"), "nll_loss", "'Mean'");
  EXPECT_EMBER_ERROR(mse_loss(x, x, ""), "mse_loss", "reduction");
  EXPECT_EMBER_ERROR(binary_cross_entropy_with_logits(x, x, {}, "max"),
                     "binary_cross_entropy_with_logits", "'max'");
}

TEST(Losses, ClassLossErrors) {
  Tensor x = zeros({2, 3}, kFloat32);
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({0, 3})), "cross_entropy", "target 3", "3 classes");
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({-1, 0})), "cross_entropy", "target -1");
  EXPECT_EMBER_ERROR(nll_loss(x, tensor({0, 5})), "nll_loss", "target 5");
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({0, 1}, kInt32)), "cross_entropy", "int64", "int32");
  EXPECT_EMBER_ERROR(nll_loss(x, tensor({0.0, 1.0})), "nll_loss", "int64", "float32");
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({0, 1, 2})), "cross_entropy", "target of shape [2]",
                     "[3]");
  EXPECT_EMBER_ERROR(nll_loss(zeros({2, 3, 4}, kFloat32), tensor({0, 1})), "nll_loss", "[2, 4]");
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({0, 1}), zeros({2}, kFloat32)), "cross_entropy",
                     "weight of shape [3]");
  EXPECT_EMBER_ERROR(cross_entropy(x, tensor({0, 1}), {}, -100, "mean", 1.5), "cross_entropy",
                     "label_smoothing", "1.5");
  EXPECT_EMBER_ERROR(cross_entropy(x, zeros({2, 3}, kInt64)), "cross_entropy",
                     "floating point target", "int64");
  EXPECT_EMBER_ERROR(cross_entropy(x, zeros({2, 3}, kFloat32), {}, 0), "cross_entropy",
                     "ignore_index");
  EXPECT_EMBER_ERROR(cross_entropy(full({}, 1.0), full({}, 0, kInt64)), "cross_entropy", "0-dim");
  EXPECT_EMBER_ERROR(cross_entropy(zeros({2, 3}, kInt64), tensor({0, 1})), "cross_entropy", "input",
                     "int64");
}

TEST(Losses, ElementwiseLossErrors) {
  Tensor x = zeros({2, 3}, kFloat32);
  EXPECT_EMBER_ERROR(mse_loss(x, zeros({4}, kFloat32)), "mse_loss", "cannot be broadcast");
  EXPECT_EMBER_ERROR(mse_loss(tensor({1, 2}), tensor({1, 2})), "mse_loss", "floating point",
                     "int64");
  EXPECT_EMBER_ERROR(binary_cross_entropy_with_logits(x, zeros({3}, kFloat32)),
                     "binary_cross_entropy_with_logits", "target of shape [3]", "[2, 3]");
  EXPECT_EMBER_ERROR(binary_cross_entropy_with_logits(x, zeros({2, 3}, kInt64)),
                     "binary_cross_entropy_with_logits", "target", "int64");
  EXPECT_EMBER_ERROR(binary_cross_entropy_with_logits(x, x, zeros({4}, kFloat32)),
                     "binary_cross_entropy_with_logits", "weight of shape [4]",
                     "does not broadcast");
  EXPECT_EMBER_ERROR(binary_cross_entropy_with_logits(x, x, {}, "mean", zeros({2, 2, 3}, kFloat32)),
                     "binary_cross_entropy_with_logits", "pos_weight of shape [2, 2, 3]");
}

}  // namespace
}  // namespace ember::testing
