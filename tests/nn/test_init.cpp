// nn::init: gains and fans (PyTorch's formulas), the statistics and bounds of each draw, the
// layers' default initialisation, seeding and errors.
#include <cmath>

#include "ember/nn/conv.h"
#include "ember/nn/init.h"
#include "ember/nn/linear.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;
namespace init = ember::nn::init;

double max_abs(const Tensor& t) { return t.abs().max().item<double>(); }

TEST(NnInit, GainAndFans) {
  // torch.nn.init.calculate_gain(...)
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1);
  EXPECT_DOUBLE_EQ(init::calculate_gain("conv_transpose2d"), 1);
  EXPECT_DOUBLE_EQ(init::calculate_gain("sigmoid"), 1);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3));
  EXPECT_DOUBLE_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_EMBER_ERROR(init::calculate_gain("swish"), "calculate_gain: unsupported nonlinearity \"swish\"");
  // A conv weight [8, 3, 5, 2]: fan_in = 3 * 10, fan_out = 8 * 10.
  init::Fans fans = init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 2}));
  EXPECT_EQ(fans.fan_in, 30);
  EXPECT_EQ(fans.fan_out, 80);
  auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(empty({4, 7}));
  EXPECT_EQ(fan_in, 7);
  EXPECT_EQ(fan_out, 4);
  EXPECT_EMBER_ERROR(
      init::calculate_fan_in_and_fan_out(empty({5})),
      "calculate_fan_in_and_fan_out: fan in and fan out can not be computed for a tensor with fewer "
      "than 2 dimensions, got shape [5]");
}

TEST(NnInit, DrawsHaveTheRightStatistics) {
  manual_seed(11);
  Tensor t = empty({200, 300}, kFloat64);  // fan_in 300, fan_out 200
  // kaiming_uniform_(a=0, fan_in, leaky_relu): bound = sqrt(2) * sqrt(3 / 300).
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 300);
  init::kaiming_uniform_(t);
  EXPECT_LE(max_abs(t), bound);
  EXPECT_GT(max_abs(t), 0.99 * bound);
  EXPECT_NEAR(t.std().item<double>(), bound / std::sqrt(3.0), 0.01 * bound);
  // kaiming_normal_(mode fan_out, relu): std = sqrt(2 / 200).
  init::kaiming_normal_(t, 0, "fan_out", "relu");
  EXPECT_NEAR(t.std().item<double>(), std::sqrt(2.0 / 200), 0.01 * std::sqrt(2.0 / 200));
  EXPECT_NEAR(t.mean().item<double>(), 0, 0.002);
  // xavier_uniform_(gain 2): bound = 2 * sqrt(6 / 500); xavier_normal_: std = sqrt(2 / 500).
  init::xavier_uniform_(t, 2);
  EXPECT_LE(max_abs(t), 2 * std::sqrt(6.0 / 500));
  EXPECT_NEAR(t.std().item<double>(), 2 * std::sqrt(2.0 / 500), 0.02 * std::sqrt(2.0 / 500));
  init::xavier_normal_(t);
  EXPECT_NEAR(t.std().item<double>(), std::sqrt(2.0 / 500), 0.01 * std::sqrt(2.0 / 500));
  init::uniform_(t, 2, 3);
  EXPECT_GE(t.min().item<double>(), 2);
  EXPECT_LT(t.max().item<double>(), 3);
  init::normal_(t, 5, 0.5);
  EXPECT_NEAR(t.mean().item<double>(), 5, 0.005);
  EXPECT_NEAR(t.std().item<double>(), 0.5, 0.005);
  init::constant_(t, 0.25);
  EXPECT_CLOSE(t, full({200, 300}, 0.25, kFloat64));
  init::ones_(t);
  EXPECT_EQ(t.sum().item<double>(), 60000);
  init::zeros_(t);
  EXPECT_EQ(max_abs(t), 0);
}

TEST(NnInit, TruncNormalStaysInBounds) {
  manual_seed(5);
  Tensor t = empty({20000}, kFloat64);
  // Wide window: normal draws, the few outside redrawn. N(0, 1) cut at +-2 has std 0.8796.
  init::trunc_normal_(t);
  EXPECT_GE(t.min().item<double>(), -2);
  EXPECT_LE(t.max().item<double>(), 2);
  EXPECT_NEAR(t.std().item<double>(), 0.8796, 0.015);
  // Narrow window far in the tail (mass < 0.3): the uniform proposals; all in [1, 1.1].
  init::trunc_normal_(t, 0, 0.5, 1, 1.1);
  EXPECT_GE(t.min().item<double>(), 1);
  EXPECT_LE(t.max().item<double>(), 1.1);
  // The density falls across the window: the lower half holds
  // (Phi(2.1) - Phi(2)) / (Phi(2.2) - Phi(2)) = 0.5523 of the draws.
  EXPECT_NEAR(t.lt(1.05).to(kFloat64).mean().item<double>(), 0.5523, 0.012);
  EXPECT_EMBER_ERROR(init::trunc_normal_(t, 0, 1, 2, 1), "trunc_normal_: expects a < b and std > 0");
}

TEST(NnInit, SameSeedSameDraws) {
  Tensor a = empty({50}), b = empty({50});
  manual_seed(7);
  init::kaiming_uniform_(a.view({5, 10}));
  manual_seed(7);
  init::kaiming_uniform_(b.view({5, 10}));
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
  Generator gen(7);
  init::normal_(a, 0, 1, &gen);
  Generator gen2(7);
  init::normal_(b, 0, 1, &gen2);
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
}

TEST(NnInit, LayerDefaultsAreKaimingUniformWithASqrt5) {
  manual_seed(0);
  // nn.Linear(400, 300): weight and bias ~ U(-1/sqrt(400), 1/sqrt(400)) = U(-0.05, 0.05).
  nn::Linear lin(400, 300);
  EXPECT_LE(max_abs(lin->weight), 0.05);
  EXPECT_GT(max_abs(lin->weight), 0.0499);
  EXPECT_NEAR(lin->weight.std().item<double>(), 0.05 / std::sqrt(3.0), 0.0005);
  EXPECT_LE(max_abs(lin->bias), 0.05);
  EXPECT_GT(max_abs(lin->bias), 0.045);
  EXPECT_FALSE(lin->weight.grad_fn());
  EXPECT_TRUE(lin->weight.requires_grad());
  // nn.Conv2d(16, 32, 3): fan_in = 16 * 9 = 144, bound 1/12.
  nn::Conv2d conv(16, 32, 3);
  EXPECT_LE(max_abs(conv->weight), 1.0 / 12);
  EXPECT_GT(max_abs(conv->weight), 0.99 / 12);
  EXPECT_LE(max_abs(conv->bias), 1.0 / 12);
  // nn.ConvTranspose2d(4, 6, 3, groups=2): weight [4, 3, 3, 3], fan_in = 3 * 9 = 27.
  nn::ConvTranspose2d convt(nn::ConvTranspose2dOptions(4, 6, 3).groups(2));
  EXPECT_LE(max_abs(convt->weight), 1 / std::sqrt(27.0));
  EXPECT_LE(max_abs(convt->bias), 1 / std::sqrt(27.0));
  // reset_parameters draws again.
  Tensor before = lin->weight.clone();
  lin->reset_parameters();
  EXPECT_GT(max_abs(lin->weight - before), 0);
}

TEST(NnInit, NoOpsAndErrors) {
  Tensor none = empty({0, 3});
  EXPECT_TRUE(init::kaiming_uniform_(none).is_same(none));
  EXPECT_EMBER_ERROR(init::kaiming_uniform_(empty({3})), "calculate_fan_in_and_fan_out", "[3]");
  EXPECT_EMBER_ERROR(init::kaiming_normal_(empty({3, 3}), 0, "fan_avg"),
                     "kaiming_normal_: mode must be \"fan_in\" or \"fan_out\", got \"fan_avg\"");
  EXPECT_EMBER_ERROR(init::xavier_uniform_(empty({3})), "calculate_fan_in_and_fan_out");
  // In place on a parameter under grad mode: allowed (init runs under no_grad).
  Tensor p = empty({2, 2}).requires_grad_();
  init::ones_(p);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_CLOSE(p, ones({2, 2}));
}

}  // namespace
}  // namespace ember::testing
