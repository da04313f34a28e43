// Loss modules and nn::functional's composites against PyTorch (float64 default dtype), their
// gradients by gradcheck, and their errors.
#include "ember/nn/functional.h"
#include "ember/nn/loss.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;
namespace F = ember::nn::functional;

// x = wave([4, 3], 0.9, -1.0) * 2; t = [0, 2, 1, 2]; w = [0.5, 1.0, 2.0]; y = wave([4, 3], 0.5, 0.3)
Tensor logits() { return wave({4, 3}, 0.9, -1.0) * 2; }
Tensor targets() { return tensor({0, 2, 1, 2}); }
Tensor class_weights() { return f64({0.5, 1.0, 2.0}); }
Tensor regression_target() { return wave({4, 3}, 0.5, 0.3); }

double value(const Tensor& t) { return t.item<double>(); }

TEST(NnCrossEntropyLoss, MatchesPyTorch) {
  Tensor x = logits(), t = targets();
  // nn.CrossEntropyLoss()(x, t)
  EXPECT_NEAR(value(nn::CrossEntropyLoss()(x, t)), 2.470253529, 1e-9);
  // nn.CrossEntropyLoss(weight=w, ignore_index=2, label_smoothing=0.1)(x, t)
  nn::CrossEntropyLoss weighted(
      nn::CrossEntropyLossOptions().weight(class_weights()).ignore_index(2).label_smoothing(0.1));
  EXPECT_NEAR(value(weighted(x, t)), 2.26675950017, 1e-9);
  // nn.CrossEntropyLoss(reduction='none')(x, t)
  EXPECT_CLOSE(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().reduction(nn::kNone))(x, t),
               f64({3.3322285703, 3.05926291013, 1.83450009107, 1.65502254449}));
  // nn.CrossEntropyLoss(reduction='sum', label_smoothing=0.2)(x, t)
  EXPECT_NEAR(value(nn::CrossEntropyLoss(
                  nn::CrossEntropyLossOptions().reduction(nn::kSum).label_smoothing(0.2))(x, t)),
              9.10030394758, 1e-9);
  // The class weights are a buffer (PyTorch's key "weight").
  EXPECT_EQ(keys_of(weighted->state_dict()), std::vector<std::string>{"weight"});
  EXPECT_TRUE(nn::CrossEntropyLoss()->state_dict().empty());
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return weighted(in[0], t); },
                                  {x.requires_grad_()}));
  EXPECT_EMBER_ERROR(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().label_smoothing(1.5)),
                     "CrossEntropyLoss: label_smoothing must be between 0.0 and 1.0, got 1.5");
}

TEST(NnNLLLoss, MatchesPyTorch) {
  // nn.NLLLoss(weight=w)(F.log_softmax(x, 1), t)
  nn::NLLLoss nll(nn::NLLLossOptions().weight(class_weights()));
  EXPECT_NEAR(value(nll(logits().log_softmax(1), targets())), 2.35076096099, 1e-9);
}

TEST(NnRegressionLosses, MatchPyTorch) {
  Tensor x = logits(), y = regression_target();
  // nn.MSELoss()(x, y), nn.MSELoss(reduction='sum')(x, y)
  EXPECT_NEAR(value(nn::MSELoss()(x, y)), 2.32872112487, 1e-9);
  EXPECT_NEAR(value(nn::MSELoss(nn::kSum)(x, y)), 27.9446534985, 1e-8);
  // nn.L1Loss()(x, y), nn.L1Loss(reduction='none')(x, y)[0]
  EXPECT_NEAR(value(nn::L1Loss()(x, y)), 1.33148552659, 1e-9);
  EXPECT_CLOSE(nn::L1Loss(nn::kNone)(x, y)[0], f64({1.97846217628, 0.917022924193, 0.471153996382}));
  // nn.SmoothL1Loss()(x, y); nn.SmoothL1Loss(beta=0.5, reduction='none')(x, y); beta=0.0
  EXPECT_NEAR(value(nn::SmoothL1Loss()(x, y)), 0.86731341591, 1e-9);
  nn::SmoothL1Loss half(nn::SmoothL1LossOptions().beta(0.5).reduction(nn::kNone));
  EXPECT_CLOSE(half(x, y), f64({{1.72846217628, 0.667022924193, 0.221986088307},
                                {0.759481990027, 0.0813946814607, 0.786554605535},
                                {1.49545845364, 0.802676993505, 0.499987131114},
                                {2.20410268909, 2.56098393547, 1.21664389233}}));
  EXPECT_NEAR(value(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0))(x, y)), 1.33148552659, 1e-9);
  // Gradients w.r.t. both arguments (away from the kinks).
  for (const std::function<Tensor(const Tensor&, const Tensor&)>& loss :
       std::vector<std::function<Tensor(const Tensor&, const Tensor&)>>{nn::MSELoss(), nn::L1Loss(nn::kSum),
                                                                        half, nn::SmoothL1Loss()})
    EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return loss(in[0], in[1]); },
                                    {x.clone().requires_grad_(), y.clone().requires_grad_()}));
  EXPECT_EMBER_ERROR(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(-1)),
                     "SmoothL1Loss: beta must not be negative");
}

TEST(NnBCEWithLogitsLoss, MatchesPyTorch) {
  Tensor x = logits();
  Tensor y = regression_target().gt(0).to(kFloat64);
  // nn.BCEWithLogitsLoss()(x, yt); (pos_weight=[1, 2, 0.5]); (weight=w, reduction='sum')
  EXPECT_NEAR(value(nn::BCEWithLogitsLoss()(x, y)), 0.868258746913, 1e-9);
  nn::BCEWithLogitsLoss pos(nn::BCEWithLogitsLossOptions().pos_weight(f64({1.0, 2.0, 0.5})));
  EXPECT_NEAR(value(pos(x, y)), 0.905261591672, 1e-9);
  EXPECT_NEAR(value(nn::BCEWithLogitsLoss(
                  nn::BCEWithLogitsLossOptions().weight(class_weights()).reduction(nn::kSum))(x, y)),
              11.7710242029, 1e-8);
  EXPECT_EQ(keys_of(pos->state_dict()), std::vector<std::string>{"pos_weight"});
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return pos(in[0], y); },
                                  {x.requires_grad_()}));
}

TEST(NnFunctional, LinearMatchesPyTorch) {
  // F.linear(wave([2,3]), wave([4,3], 0.5, 0.2), wave([4], 0.9, 0.4))
  Tensor x = wave({2, 3}), w = wave({4, 3}, 0.5, 0.2), b = wave({4}, 0.9, 0.4);
  Tensor expected = f64({{1.39504602864, 1.74696189211, -0.0862997105393, -0.868413790647},
                         {2.08531371325, 3.09685650316, -0.585591860487, -2.2889454607}});
  EXPECT_CLOSE(F::linear(x, w, b), expected);
  EXPECT_CLOSE(F::linear(x, w), expected - b);
  EXPECT_CLOSE(F::linear(x.unsqueeze(0), w, b)[0], expected);
  EXPECT_TRUE(
      autograd::gradcheck([](const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in[2]); },
                          {wave({2, 2, 3}).requires_grad_(), w.requires_grad_(), b.requires_grad_()}));
  EXPECT_EMBER_ERROR(F::linear(x, wave({4, 2})), "linear: input has 3 features, but the weight is [4, 2]");
  EXPECT_EMBER_ERROR(F::linear(x, w, wave({3})), "linear: expected a bias of shape [4], got [3]");
  EXPECT_EMBER_ERROR(F::linear(x, wave({12})), "linear: expected a 2D weight");
  // The re-exported core ops answer to PyTorch's names.
  EXPECT_CLOSE(F::relu(f64({-1, 2})), f64({0, 2}));
  EXPECT_CLOSE(F::softmax(f64({0, 0}), 0), f64({0.5, 0.5}));
}

TEST(NnFunctional, LossErrors) {
  Tensor x = logits(), y = regression_target();
  EXPECT_EMBER_ERROR(F::l1_loss(x, y, "avg"),
                     "l1_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'");
  EXPECT_EMBER_ERROR(F::smooth_l1_loss(x, y, "mean", -0.5),
                     "smooth_l1_loss: beta must not be negative, got -0.5");
  EXPECT_EMBER_ERROR(F::l1_loss(x, targets()), "l1_loss: expected floating point input and target", "int64");
  EXPECT_EMBER_ERROR(F::smooth_l1_loss(x, wave({7})), "smooth_l1_loss:", "[4, 3]", "[7]");
  EXPECT_EMBER_ERROR(F::l1_loss(x, wave({4, 2})), "l1_loss:", "[4, 3]", "[4, 2]");
  EXPECT_EMBER_ERROR(F::rms_norm(x, {4}),
                     "rms_norm: expected input with trailing dims [4], got input [4, 3]");
  EXPECT_EMBER_ERROR(F::rms_norm(x, {3}, wave({4})), "rms_norm: expected weight of shape [3], got [4]");
  EXPECT_EMBER_ERROR(F::rms_norm(targets().view({2, 2}), {2}), "rms_norm: expected a floating point input");
}

// Reference values from PyTorch's documented formulas, in float64 (Python's math module).
TEST(NnBCELoss, MatchesTheFormulaWithClampedLogs) {
  Tensor x = f64({{0.2, 0.7, 0.0}, {1.0, 0.5, 0.9}}), t = f64({{0, 1, 0}, {1, 0.3, 0.6}});
  EXPECT_CLOSE(F::binary_cross_entropy(x, t, {}, "none"), f64({{0.2231435513142097, 0.35667494393873245, 0},
                                                               {0, 0.6931471805599453, 0.9842503465923143}}));
  EXPECT_NEAR(value(nn::BCELoss()(x, t)), 0.37620267040086697, 1e-12);
  EXPECT_NEAR(value(nn::BCELoss(nn::BCELossOptions().reduction(nn::kSum))(x, t)), 2.257216022405202, 1e-12);
  nn::BCELoss weighted(nn::BCELossOptions().weight(f64({0.5, 1, 2})));
  EXPECT_NEAR(value(weighted(x, t)), 0.5216490988900685, 1e-12);
  EXPECT_EQ(keys_of(weighted->state_dict()), std::vector<std::string>{"weight"});
  // d/dx = (x - t) / max(x (1 - x), 1e-12) / n: finite at 0 and 1, as PyTorch's.
  Tensor xg = x.clone().requires_grad_();
  nn::BCELoss()(xg, t).backward();
  EXPECT_CLOSE(xg.grad(), f64({{0.2083333333333333, -0.2380952380952381, 0},
                               {0, 0.13333333333333333, 0.5555555555555557}}));
  // A certain wrong answer costs 100 (the clamped log), with a large finite gradient.
  Tensor sure = f64({0.0}).requires_grad_();
  Tensor l = F::binary_cross_entropy(sure, f64({1.0}));
  EXPECT_NEAR(value(l), 100.0, 1e-12);
  l.backward();
  EXPECT_NEAR(sure.grad().item<double>(), -1e12, 1);
  // Gradients of input and target (away from 0 and 1), also through create_graph.
  Tensor xi = f64({{0.2, 0.7, 0.4}, {0.35, 0.5, 0.9}}).requires_grad_(), ti = t.clone().requires_grad_();
  auto fn = [&](const std::vector<Tensor>& in) { return weighted(in[0], in[1]); };
  EXPECT_TRUE(autograd::gradcheck(fn, {xi, ti}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {xi, ti}));
  EXPECT_EMBER_ERROR(F::binary_cross_entropy(x, f64({1, 0})), "binary_cross_entropy", "[2, 3]", "[2]");
  EXPECT_EMBER_ERROR(F::binary_cross_entropy(x, t, f64({{1}, {1}, {1}})), "binary_cross_entropy", "weight");
}

TEST(NnKLDivLoss, MatchesTheFormula) {
  Tensor p = f64({{0.2, 0.3, 0.5}, {0.6, 0.1, 0.3}}), t = f64({{0.1, 0.0, 0.9}, {0.25, 0.25, 0.5}});
  Tensor log_p = p.log();
  EXPECT_CLOSE(F::kl_div(log_p, t, "none"),
               f64({{-0.06931471805599453, 0, 0.5290079984119072},
                    {-0.21886718433847496, 0.22907268296853872, 0.2554128118829954}}));
  EXPECT_NEAR(value(nn::KLDivLoss()(log_p, t)), 0.12088526514482863, 1e-12);
  EXPECT_NEAR(value(F::kl_div(log_p, t, "sum")), 0.7253115908689718, 1e-12);
  nn::KLDivLoss batchmean(nn::KLDivLossOptions().reduction("batchmean"));
  EXPECT_NEAR(value(batchmean(log_p, t)), 0.3626557954344859, 1e-12);
  // log_target: the same divergence from log-probabilities (t > 0 here).
  Tensor tp = f64({{0.1, 0.4, 0.5}, {0.25, 0.25, 0.5}});
  EXPECT_CLOSE(F::kl_div(log_p, tp.log(), "sum", /*log_target=*/true), F::kl_div(log_p, tp, "sum"));
  // A zero target contributes 0 and a finite gradient.
  Tensor tz = t.clone().requires_grad_(), lp = log_p.clone().requires_grad_();
  batchmean(lp, tz).backward();
  EXPECT_TRUE(tz.grad().isfinite().all().item<bool>());
  EXPECT_CLOSE(lp.grad(), -t / 2);
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return batchmean(in[0], in[1]); },
                                  {log_p.clone().requires_grad_(), tp.clone().requires_grad_()}));
  EXPECT_EMBER_ERROR(nn::KLDivLoss(nn::KLDivLossOptions().reduction("batch")), "KLDivLoss", "batchmean",
                     "batch");
  EXPECT_EMBER_ERROR(F::kl_div(log_p, t, "avg"), "kl_div", "'avg'");
}

}  // namespace
}  // namespace ember::testing

namespace ember::testing {
namespace {

// A loss computed and dropped without backward frees its graph: the node saves the input, so the
// input's count of holders goes back to one (the node once held its own output, a cycle that
// leaked each such call; found by LeakSanitizer).
TEST(NnCrossEntropyLoss, ItsGraphIsFreedWithoutABackward) {
  Tensor x = randn({4, 3}).requires_grad_();
  Tensor t = targets();
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    { Tensor loss = cross_entropy(x, t, {}, -100, reduction); }
    EXPECT_EQ(x.use_count(), 1u);
    { Tensor loss = nll_loss(x.log_softmax(1), t, {}, -100, reduction); }
    EXPECT_EQ(x.use_count(), 1u);
  }
}

}  // namespace
}  // namespace ember::testing
