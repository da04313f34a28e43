// nn::LSTM and nn::GRU (nn/rnn.h): one step against PyTorch's equations written out in scalars,
// parameter names and shapes as PyTorch's state_dict, final states against the outputs,
// batch_first and bidirectional layouts, float64 gradients, initialization and errors.
#include <cmath>

#include "ember/nn/rnn.h"
#include "test_util.h"

namespace ember::testing {
namespace {

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// Sets a one-unit cell's parameters (in = H = 1) to w_ih[k] = 0.1 (k + 1), w_hh[k] = -0.2 (k + 1),
// b_ih[k] = 0.05 k, b_hh[k] = 0.3 - 0.1 k, gate k in PyTorch's order.
void set_unit_parameters(nn::RNNBase& m) {
  NoGradGuard no_grad;
  const std::vector<Tensor>& w = m.all_weights[0];
  for (int64_t k = 0; k < w[0].size(0); ++k) {
    w[0][k].fill_(0.1 * static_cast<double>(k + 1));
    w[1][k].fill_(-0.2 * static_cast<double>(k + 1));
    w[2][k].fill_(0.05 * static_cast<double>(k));
    w[3][k].fill_(0.3 - 0.1 * static_cast<double>(k));
  }
}

// Gate k's pre-activation for input x and hidden h under set_unit_parameters.
double pre(int k, double x, double h) {
  return 0.1 * (k + 1) * x + 0.05 * k - 0.2 * (k + 1) * h + (0.3 - 0.1 * k);
}

TEST(Rnn, LstmStepFollowsPyTorchsEquations) {
  nn::LSTM lstm(1, 1);
  lstm->to(kFloat64);
  set_unit_parameters(*lstm);
  const double x = 0.5, h0 = 0.2, c0 = -0.3;
  auto [out, states] = lstm(full({1, 1, 1}, x, kFloat64),
                            std::make_tuple(full({1, 1, 1}, h0, kFloat64), full({1, 1, 1}, c0, kFloat64)));
  const double i = sigmoid(pre(0, x, h0)), f = sigmoid(pre(1, x, h0)), g = std::tanh(pre(2, x, h0)),
               o = sigmoid(pre(3, x, h0));
  const double c = f * c0 + i * g, h = o * std::tanh(c);
  EXPECT_NEAR(out.item<double>(), h, 1e-15);
  EXPECT_NEAR(std::get<0>(states).item<double>(), h, 1e-15);
  EXPECT_NEAR(std::get<1>(states).item<double>(), c, 1e-15);
}

TEST(Rnn, GruStepFollowsPyTorchsEquations) {
  nn::GRU gru(1, 1);
  gru->to(kFloat64);
  set_unit_parameters(*gru);
  const double x = -0.7, h0 = 0.4;
  auto [out, h_n] = gru(full({1, 1, 1}, x, kFloat64), full({1, 1, 1}, h0, kFloat64));
  // r multiplies the hidden state's projection with its bias (W_hn h + b_hn), as PyTorch's.
  const double r = sigmoid(pre(0, x, h0)), z = sigmoid(pre(1, x, h0));
  const double n = std::tanh(0.3 * x + 0.1 + r * (-0.6 * h0 + 0.1));
  EXPECT_NEAR(out.item<double>(), (1 - z) * n + z * h0, 1e-15);
  EXPECT_NEAR(h_n.item<double>(), (1 - z) * n + z * h0, 1e-15);
}

TEST(Rnn, ParametersAreNamedAndShapedAsPyTorchs) {
  nn::LSTM lstm(nn::LSTMOptions(3, 5).num_layers(2).bidirectional(true));
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm->named_parameters()) names.push_back(name);
  const std::vector<std::string> expected = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(names, expected);
  auto params = lstm->named_parameters();
  EXPECT_TRUE(params["weight_ih_l0"].sizes().equals({20, 3}));
  EXPECT_TRUE(params["weight_ih_l1"].sizes().equals({20, 10}));
  EXPECT_TRUE(params["weight_hh_l1_reverse"].sizes().equals({20, 5}));
  nn::GRU gru(nn::GRUOptions(3, 5).bias(false));
  EXPECT_EQ(gru->named_parameters().size(), 2u);
  EXPECT_TRUE(gru->named_parameters()["weight_hh_l0"].sizes().equals({15, 5}));
  // PyTorch's initialization: every parameter within 1/sqrt(hidden_size).
  for (const Tensor& p : lstm->parameters()) EXPECT_LE(p.abs().max().item<float>(), 1 / std::sqrt(5.0f));
}

TEST(Rnn, FinalStatesLayoutsAndDirections) {
  manual_seed(2);
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2).bidirectional(true));
  const Tensor x = randn({6, 2, 3});
  auto [out, states] = lstm(x);
  EXPECT_TRUE(out.sizes().equals({6, 2, 8}));
  const Tensor h_n = std::get<0>(states);
  EXPECT_TRUE(h_n.sizes().equals({4, 2, 4}));
  // The last layer's forward direction ends at the last step, its reverse direction at the first.
  EXPECT_CLOSE(out[5].narrow(1, 0, 4), h_n[2], Tolerance{0, 0});
  EXPECT_CLOSE(out[0].narrow(1, 4, 4), h_n[3], Tolerance{0, 0});
  // batch_first is the same computation, transposed.
  nn::LSTM first(nn::LSTMOptions(3, 4).num_layers(2).bidirectional(true).batch_first(true));
  first->load_state_dict(lstm->state_dict());
  auto [out_bf, states_bf] = first(x.transpose(0, 1));
  EXPECT_CLOSE(out_bf, out.transpose(0, 1), Tolerance{1e-6, 1e-7});
  EXPECT_CLOSE(std::get<1>(states_bf), std::get<1>(states), Tolerance{1e-6, 1e-7});
  // Dropout between layers acts in training only.
  nn::GRU gru(nn::GRUOptions(3, 4).num_layers(2).dropout(0.5));
  gru->eval();
  Tensor a = std::get<0>(gru(x)), b = std::get<0>(gru(x));
  EXPECT_CLOSE(a, b, Tolerance{0, 0});
  gru->train();
  EXPECT_FALSE(std::get<0>(gru(x)).equal(a));
}

TEST(Rnn, GradientsInFloat64) {
  manual_seed(3);
  nn::LSTM lstm(nn::LSTMOptions(2, 3).num_layers(2).bidirectional(true));
  lstm->to(kFloat64);
  Tensor x = randn({3, 2, 2}, kFloat64).requires_grad_(), h0 = randn({4, 2, 3}, kFloat64).requires_grad_(),
         c0 = randn({4, 2, 3}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [out, s] = lstm(in[0], std::make_tuple(in[1], in[2]));
        return out.sum() + std::get<1>(s).sum() * 0.5;
      },
      {x, h0, c0}));
  nn::GRU gru(nn::GRUOptions(2, 3).batch_first(true));
  gru->to(kFloat64);
  Tensor xb = randn({2, 4, 2}, kFloat64).requires_grad_();
  std::vector<Tensor> inputs = {xb};
  for (const Tensor& p : gru->parameters()) inputs.push_back(p);
  EXPECT_TRUE(
      autograd::gradcheck([&](const std::vector<Tensor>& in) { return std::get<0>(gru(in[0])); }, inputs));
}

TEST(Rnn, BadInputIsAClearError) {
  nn::LSTM lstm(3, 4);
  EXPECT_EMBER_ERROR(lstm(randn({2, 3})), "LSTM: expected a 3D input [seq, batch, features]");
  EXPECT_EMBER_ERROR(lstm(randn({2, 1, 5})), "LSTM: expected 3 input features, got 5");
  EXPECT_EMBER_ERROR(lstm(randn({2, 1, 3}), std::make_tuple(zeros({1, 2, 4}), zeros({1, 1, 4}))),
                     "LSTM: expected a hidden state of shape [1, 1, 4], got [1, 2, 4]");
  EXPECT_EMBER_ERROR(nn::GRU(3, 0), "GRU: input_size, hidden_size and num_layers");
  EXPECT_EMBER_ERROR(nn::GRU(nn::GRUOptions(3, 4).dropout(2)), "GRU: dropout must be a probability");
  nn::GRU gru(3, 4);
  EXPECT_EMBER_ERROR(gru(randn({2, 1, 3}, kFloat64)), "GRU: the input is float64");
}

}  // namespace
}  // namespace ember::testing
