// optim::swa_utils against hand-computed values of PyTorch's formulas: EMA and SWA averages of
// weight snapshots, buffers averaged or copied, the count through state_dict, update_bn's
// cumulative BatchNorm statistics, and SWALR's cosine and linear anneals.
#include <ember/optim/swa_utils.h>

#include "test_util.h"

namespace ember::testing {
namespace {

using optim::swa_utils::AveragedModel;

// Sets every parameter of `m` to `value` + its position (so that tensors differ).
void set_weights(nn::Module& m, double value) {
  NoGradGuard no_grad;
  double k = 0;
  for (const Tensor& p : m.parameters()) p.fill_(value + k++);
}

TEST(SwaUtils, EmaFoldsSnapshotsWithTheDecay) {
  nn::Linear model(3, 2), copy(3, 2);
  AveragedModel ema(copy, optim::swa_utils::get_ema_multi_avg_fn(0.9));
  nn::Linear by_one(3, 2);
  AveragedModel ema_by_one(by_one, optim::swa_utils::get_ema_avg_fn(0.9));
  double want = 0;
  for (double w : {1.0, 5.0, -2.0}) {
    set_weights(*model, w);
    ema.update_parameters(*model);
    ema_by_one.update_parameters(*model);
    want = w == 1.0 ? w : 0.9 * want + 0.1 * w;  // the first update copies
  }
  EXPECT_EQ(ema.n_averaged().item<int64_t>(), 3);
  EXPECT_CLOSE(copy->weight, full({2, 3}, want), Tolerance{1e-6, 1e-6});
  EXPECT_CLOSE(copy->bias, full({2}, want + 1), Tolerance{1e-6, 1e-6});
  EXPECT_CLOSE(by_one->weight, copy->weight, Tolerance{1e-6, 1e-6});
}

TEST(SwaUtils, SwaIsTheMeanOfTheSnapshots) {
  nn::Linear model(4, 3), copy(4, 3);
  AveragedModel swa(copy);  // no function: the equal-weight mean
  nn::Linear by_one(4, 3);
  AveragedModel swa_by_one(by_one, optim::swa_utils::get_swa_avg_fn());
  for (double w : {2.0, 4.0, 9.0, -3.0}) {
    set_weights(*model, w);
    swa.update_parameters(*model);
    swa_by_one.update_parameters(*model);
  }
  EXPECT_CLOSE(copy->weight, full({3, 4}, 3.0), Tolerance{1e-6, 1e-6});  // (2 + 4 + 9 - 3) / 4
  EXPECT_CLOSE(by_one->weight, full({3, 4}, 3.0), Tolerance{1e-6, 1e-6});
}

// A model with BatchNorm: its statistics are copied from the model, or averaged with
// use_buffers (the integer batch count is copied either way).
TEST(SwaUtils, BuffersAreCopiedOrAveraged) {
  auto make = [] { return nn::Sequential(nn::Linear(2, 3), nn::BatchNorm1d(3)); };
  nn::Sequential model = make(), copied = make(), averaged = make();
  AveragedModel plain(copied, optim::swa_utils::get_ema_multi_avg_fn(0.5));
  AveragedModel with_buffers(averaged, optim::swa_utils::get_ema_multi_avg_fn(0.5), /*use_buffers=*/true);
  auto* bn = dynamic_cast<nn::BatchNorm1dImpl*>(model->named_modules()["1"].get());
  ASSERT_NE(bn, nullptr);
  for (double mean : {4.0, 8.0}) {
    {
      NoGradGuard no_grad;
      bn->running_mean.fill_(mean);
      bn->num_batches_tracked.fill_(static_cast<int64_t>(mean));
    }
    plain.update_parameters(*model);
    with_buffers.update_parameters(*model);
  }
  const OrderedDict<Tensor> p = copied->state_dict(), a = averaged->state_dict();
  EXPECT_CLOSE(p["1.running_mean"], full({3}, 8.0));
  EXPECT_CLOSE(a["1.running_mean"], full({3}, 6.0));  // 0.5 * 4 + 0.5 * 8
  EXPECT_EQ(a["1.num_batches_tracked"].item<int64_t>(), 8);
}

// PyTorch's keys; a loaded count goes on from where it was (the next update averages).
TEST(SwaUtils, StateDictCarriesTheCount) {
  nn::Linear model(2, 2), first_copy(2, 2), second_copy(2, 2);
  AveragedModel swa(first_copy);
  for (double w : {3.0, 6.0}) {
    set_weights(*model, w);
    swa.update_parameters(*model);
  }
  const OrderedDict<Tensor> sd = swa.state_dict();
  EXPECT_EQ(sd.keys(),
            (std::vector<std::string>{"n_averaged", "module.weight", "module.bias"}));  // own first
  AveragedModel resumed(second_copy);
  resumed.load_state_dict(sd);
  set_weights(*model, 12.0);
  resumed.update_parameters(*model);
  EXPECT_CLOSE(second_copy->weight, full({2, 2}, 7.0), Tolerance{1e-6, 1e-6});  // (3 + 6 + 12) / 3
  EXPECT_EQ(resumed.n_averaged().item<int64_t>(), 3);
}

TEST(SwaUtils, ErrorsNameWhatDoesNotMatch) {
  nn::Linear model(3, 4), copy(3, 2);
  AveragedModel swa(copy);
  EXPECT_EMBER_ERROR(swa.update_parameters(*model), "AveragedModel.update_parameters", "weight", "[4, 3]",
                     "[2, 3]");
  EXPECT_EMBER_ERROR(optim::swa_utils::get_ema_multi_avg_fn(1.5), "get_ema_multi_avg_fn", "[0, 1]", "1.5");
  EXPECT_EMBER_ERROR(AveragedModel(std::shared_ptr<nn::Module>()), "AveragedModel", "null");
}

// update_bn: running statistics from scratch as the cumulative average of the batches' (mean and
// unbiased variance), then the momentum and the eval mode back.
TEST(SwaUtils, UpdateBnRecomputesTheStatistics) {
  nn::BatchNorm1d bn(2);
  nn::Sequential model(bn);
  model->eval();
  manual_seed(5);
  const std::vector<Tensor> batches{randn({6, 2}) * 2 + 1, randn({6, 2}) - 3, randn({6, 2})};
  optim::swa_utils::update_bn(batches, model);
  Tensor means = zeros({2}), vars = zeros({2});
  for (const Tensor& b : batches) means = means + b.mean(0) / 3, vars = vars + b.var(0) / 3;
  EXPECT_CLOSE(bn->running_mean, means, Tolerance{1e-5, 1e-6});
  EXPECT_CLOSE(bn->running_var, vars, Tolerance{1e-5, 1e-6});
  EXPECT_EQ(bn->options.momentum(), std::optional<double>(0.1));
  EXPECT_FALSE(model->is_training());
  // Batches as (input, target) examples, as a DataLoader gives them.
  std::vector<std::vector<Tensor>> examples;
  for (const Tensor& b : batches) examples.push_back({b, zeros({6})});
  optim::swa_utils::update_bn(examples, model);
  EXPECT_CLOSE(bn->running_mean, means, Tolerance{1e-5, 1e-6});
}

// SWALR's lrs by hand from PyTorch's get_lr: lr 1.0 annealed to 0.05 over 3 steps.
TEST(SwaUtils, SwalrAnnealsToTheSwaLr) {
  auto lrs = [](int64_t epochs, const std::string& strategy, int steps) {
    Tensor p = zeros({1}).requires_grad_();
    optim::SGD opt({p}, optim::SGDOptions(1.0));
    optim::swa_utils::SWALR sched(opt, {0.05}, epochs, strategy);
    std::vector<double> out{sched.get_last_lr()[0]};
    for (int i = 0; i < steps; ++i) {
      sched.step();
      out.push_back(sched.get_last_lr()[0]);
    }
    return out;
  };
  auto expect_lrs = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "step " << i;
  };
  // cos: alpha = (1 - cos(pi t)) / 2 = 0.25, 0.75, 1 at t = 1/3, 2/3, 1.
  expect_lrs(lrs(3, "cos", 4), {1.0, 0.7625, 0.2875, 0.05, 0.05});
  expect_lrs(lrs(3, "linear", 3), {1.0, 0.05 / 3 + 2.0 / 3, 0.1 / 3 + 1.0 / 3, 0.05});
  expect_lrs(lrs(0, "cos", 1), {0.05, 0.05});  // no annealing: swa_lr at once
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  EXPECT_EMBER_ERROR(optim::swa_utils::SWALR(opt, {0.05}, 3, "step"), "SWALR", "'cos' or 'linear'", "step");
  EXPECT_EMBER_ERROR(optim::swa_utils::SWALR(opt, {0.05}, -1), "SWALR", "anneal_epochs", "-1");
  EXPECT_EMBER_ERROR(optim::swa_utils::SWALR(opt, {0.05, 0.1}), "SWALR", "swa_lr", "one per parameter group");
}

}  // namespace
}  // namespace ember::testing
