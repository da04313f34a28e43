// batch_norm_relu against the ops it fuses, relu(batch_norm(x) + residual): output, running
// statistics, gradients of every input, layouts, and the module method ResNet calls.
#include "batch_norm_relu_mask.h"
#include "ember/autograd/engine.h"
#include "ember/core/ops/normalization.h"
#include "ember/nn/normalization.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

struct Outcome {
  Tensor y, rm, rv;
  std::vector<Tensor> grads;  // x, residual, weight, bias
};

// Fused or composite, in training or eval, on copies of the same inputs.
Outcome run(bool fused, bool training, bool cl, bool with_residual) {
  manual_seed(3);
  Tensor x = randn({4, 6, 3, 5}, kFloat64), r = randn({4, 6, 3, 5}, kFloat64);
  Tensor w = rand({6}, kFloat64) + 0.5, b = randn({6}, kFloat64), gy = randn({4, 6, 3, 5}, kFloat64);
  if (cl) x = channels_last(x), r = channels_last(r);
  for (Tensor* t : {&x, &r, &w, &b}) t->requires_grad_();
  Tensor rm = full({6}, 0.25, kFloat64), rv = full({6}, 1.5, kFloat64);
  Tensor res = with_residual ? r : Tensor();
  Tensor y = fused ? batch_norm_relu(x, rm, rv, w, b, training, 0.2, 1e-5, res)
                   : relu(with_residual ? batch_norm(x, rm, rv, w, b, training, 0.2) + r
                                        : batch_norm(x, rm, rv, w, b, training, 0.2));
  std::vector<Tensor> leaves{x, w, b};
  if (with_residual) leaves.insert(leaves.begin() + 1, r);
  return {y, rm, rv, autograd::grad({y}, leaves, {gy})};
}

TEST(BatchNormRelu, MatchesTheOpsItFuses) {
  for (bool training : {true, false})
    for (bool cl : {false, true})
      for (bool with_residual : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << "training " << training << " channels-last " << cl << " residual " << with_residual);
        Outcome f = run(true, training, cl, with_residual), c = run(false, training, cl, with_residual);
        EXPECT_TRUE(assert_close(f.y, c.y));
        EXPECT_GT((f.y == 0).sum().item<int64_t>(), 0);  // the ReLU clipped something
        EXPECT_EQ(f.y.is_contiguous(), !cl);             // the input's layout
        EXPECT_TRUE(assert_close(f.rm, c.rm));
        EXPECT_TRUE(assert_close(f.rv, c.rv));
        ASSERT_EQ(f.grads.size(), c.grads.size());
        for (size_t i = 0; i < f.grads.size(); ++i) EXPECT_TRUE(assert_close(f.grads[i], c.grads[i]));
      }
}

TEST(BatchNormRelu, TheBackwardsRecomputedMaskIsTheSavedOutputs) {
  expect_recomputed_relu_mask_is_the_saved_one(Device(kCPU));
}

TEST(BatchNormRelu, NaNStaysNaN) {
  Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}), r = tensor({{NAN, -100.0}, {0.0, 0.0}});
  Tensor y = batch_norm_relu(x, {}, {}, {}, {}, true, 0.1, 1e-5, r);
  EXPECT_TRUE(std::isnan(y[0][0].item<double>()));
  EXPECT_EQ(y[0][1].item<double>(), 0.0);
}

TEST(BatchNormRelu, RejectsAResidualUnlikeTheInput) {
  Tensor x = randn({2, 3, 4});
  EXPECT_EMBER_ERROR(batch_norm_relu(x, {}, {}, {}, {}, true, 0.1, 1e-5, randn({2, 3, 5})), "batch_norm_relu",
                     "residual", "[2, 3, 4]", "[2, 3, 5]");
  EXPECT_EMBER_ERROR(batch_norm_relu(x, {}, {}, {}, {}, true, 0.1, 1e-5, randn({2, 3, 4}, kFloat64)),
                     "batch_norm_relu", "float64");
}

// What ResNet's blocks call: the module's statistics, counted batch and eval mode included.
TEST(BatchNormRelu, ModuleForwardReluMatchesTheModule) {
  nn::BatchNorm2d fused(5), plain(5);
  manual_seed(4);
  Tensor x = randn({3, 5, 4, 4}), r = randn({3, 5, 4, 4});
  for (bool train : {true, false}) {
    fused->train(train), plain->train(train);
    EXPECT_TRUE(assert_close(fused->forward_relu(x, r), relu(plain(x) + r)));
    EXPECT_TRUE(assert_close(fused->forward_relu(x), relu(plain(x))));
  }
  EXPECT_TRUE(assert_close(fused->running_mean, plain->running_mean));
  EXPECT_TRUE(assert_close(fused->running_var, plain->running_var));
  EXPECT_EQ(fused->num_batches_tracked.item<int64_t>(), 2);
}

}  // namespace
}  // namespace ember::testing
