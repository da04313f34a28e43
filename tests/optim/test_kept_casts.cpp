// Autocast's kept casts (core/autocast_mode.h): a fused optimizer step writes the lower-precision
// copies of the parameters it updates, so autocast regions after it cast no parameters; the
// training is bit for bit the one that casts every step, and any other change to a parameter
// makes the next region cast it again.
#include "test_util.h"

namespace ember::testing {
namespace {

// A two-layer model's step under CPU autocast (bfloat16) with a fused optimizer.
struct Model {
  Tensor w1, b1, w2;
  std::vector<Tensor> params() const { return {w1, b1, w2}; }
};

Model make_model() {
  manual_seed(5);
  return {random_tensor({6, 8}, kFloat32, -0.5, 0.5).requires_grad_(),
          random_tensor({8}, kFloat32, -0.5, 0.5).requires_grad_(),
          random_tensor({8, 3}, kFloat32, -0.5, 0.5).requires_grad_()};
}

Tensor loss_of(const Model& m, const Tensor& x) {
  amp::AutocastGuard autocast(kCPU, kBFloat16);
  return sum(square(relu(addmm(m.b1, x, m.w1)).mm(m.w2)));
}

template <class Opt>
void train(const Model& m, Opt& opt, int steps, bool recast_every_step) {
  manual_seed(6);
  for (int i = 0; i < steps; ++i) {
    if (recast_every_step)
      for (const Tensor& p : m.params()) p.bump_version();  // as any in-place change would
    opt.zero_grad();
    loss_of(m, random_tensor({4, 6}, kFloat32, -1, 1)).backward();
    opt.step();
  }
}

// The cast a region makes of p, and whether it is the one made the region before.
Tensor cast_in_region(const Tensor& p) {
  amp::AutocastGuard autocast(kCPU, kBFloat16);
  return amp::detail::cast(p, kCPU, kBFloat16);
}

TEST(KeptCasts, TrainingIsTheOneThatCastsEveryStep) {
  for (bool adam : {true, false}) {
    SCOPED_TRACE(adam ? "AdamW" : "SGD");
    Model kept = make_model(), recast = make_model();
    auto run = [&](const Model& m, bool recast_every_step) {
      if (adam) {
        optim::AdamW opt(m.params(), optim::AdamWOptions(0.05).fused(true));
        train(m, opt, 5, recast_every_step);
      } else {
        optim::SGD opt(m.params(), optim::SGDOptions(0.05).momentum(0.9).fused(true));
        train(m, opt, 5, recast_every_step);
      }
    };
    run(kept, false);
    run(recast, true);
    for (size_t i = 0; i < kept.params().size(); ++i) {
      EXPECT_CLOSE(kept.params()[i].detach(), recast.params()[i].detach(), Tolerance{0, 0}) << "param " << i;
      // The kept cast is the current value's cast, reused from region to region.
      const Tensor c1 = cast_in_region(kept.params()[i]), c2 = cast_in_region(kept.params()[i]);
      EXPECT_EQ(c1.data_ptr(), c2.data_ptr());
      EXPECT_CLOSE(c1, kept.params()[i].detach().to(kBFloat16), Tolerance{0, 0});
    }
  }
}

// Gradients reach the parameter through a kept cast as through a fresh one.
TEST(KeptCasts, GradientsFlowThroughTheKeptCast) {
  Model m = make_model();
  optim::AdamW opt(m.params(), optim::AdamWOptions(0.05).fused(true));
  train(m, opt, 3, false);
  const Tensor x = random_tensor({4, 6}, kFloat32, -1, 1);
  opt.zero_grad();
  loss_of(m, x).backward();
  const Tensor kept_grad = m.w1.grad().clone();
  m.w1.bump_version();
  opt.zero_grad();
  loss_of(m, x).backward();
  EXPECT_CLOSE(kept_grad, m.w1.grad(), Tolerance{0, 0});
}

// Any change other than the fused step's, and the next region casts the new value.
TEST(KeptCasts, OtherChangesAreCastAgain) {
  Model m = make_model();
  optim::SGD opt(m.params(), optim::SGDOptions(0.05).fused(true));
  train(m, opt, 3, false);
  const Tensor before = cast_in_region(m.w1);
  EXPECT_EQ(before.data_ptr(), cast_in_region(m.w1).data_ptr());
  {
    NoGradGuard no_grad;
    m.w1.mul_(2);
  }
  const Tensor after = cast_in_region(m.w1);
  EXPECT_NE(after.data_ptr(), before.data_ptr());
  EXPECT_CLOSE(after, m.w1.detach().to(kBFloat16), Tolerance{0, 0});
  // A region after the new cast reuses it (made while a fused optimizer keeps w1's casts).
  EXPECT_EQ(after.data_ptr(), cast_in_region(m.w1).data_ptr());
  // New data: the cast of the old one is dropped.
  m.w1.set_data(random_tensor({6, 8}, kFloat32, -1, 1));
  const Tensor fresh = cast_in_region(m.w1);
  EXPECT_NE(fresh.data_ptr(), after.data_ptr());
  EXPECT_CLOSE(fresh, m.w1.detach().to(kBFloat16), Tolerance{0, 0});
}

// Casts kept in two autocast dtypes (regions of bfloat16 and of float16): a step writes those of one
// dtype, and the others are cast again.
TEST(KeptCasts, OneStepWritesCastsOfOneDtype) {
  Model m = make_model();
  optim::AdamW opt(m.params(), optim::AdamWOptions(0.05).fused(true));
  train(m, opt, 2, false);
  auto cast_as = [](const Tensor& p, ScalarType dt) {
    amp::AutocastGuard autocast(kCPU, dt);
    return amp::detail::cast(p, kCPU, dt);
  };
  opt.zero_grad();
  loss_of(m, random_tensor({4, 6}, kFloat32, -1, 1)).backward();
  cast_as(m.w1, kFloat16);  // w1's kept cast is now float16, the others' bfloat16
  opt.step();
  for (const Tensor& p : m.params()) {
    EXPECT_CLOSE(cast_as(p, kBFloat16), p.detach().to(kBFloat16), Tolerance{0, 0});
    EXPECT_CLOSE(cast_as(p, kFloat16), p.detach().to(kFloat16), Tolerance{0, 0});
  }
}

// What a CUDA graph's replay does first (cuda/graph.cpp): the copy its capture read or wrote becomes
// the parameter's kept cast again, cast anew only if the parameter changed since.
TEST(KeptCasts, RefreshMakesAGraphsCopyTheCurrentCast) {
  Model m = make_model();
  optim::SGD opt(m.params(), optim::SGDOptions(0.05).fused(true));
  train(m, opt, 3, false);
  const Tensor graphs = amp::detail::kept_cast(m.w1);
  ASSERT_TRUE(graphs.defined());
  const uint32_t version = graphs._version();
  amp::detail::refresh_kept_cast({m.w1, graphs});
  EXPECT_EQ(graphs._version(), version) << "a current cast is not cast again";
  // Changed outside the graph, and cast by an eager region into a copy of its own.
  {
    NoGradGuard no_grad;
    m.w1.mul_(2);
  }
  EXPECT_NE(cast_in_region(m.w1).data_ptr(), graphs.data_ptr());
  amp::detail::refresh_kept_cast({m.w1, graphs});
  EXPECT_EQ(cast_in_region(m.w1).data_ptr(), graphs.data_ptr());
  EXPECT_CLOSE(graphs, m.w1.detach().to(kBFloat16), Tolerance{0, 0});
  // The next fused step writes the graph's copy.
  train(m, opt, 1, false);
  EXPECT_EQ(amp::detail::kept_cast(m.w1).data_ptr(), graphs.data_ptr());
  EXPECT_CLOSE(graphs, m.w1.detach().to(kBFloat16), Tolerance{0, 0});
}

// Parameters no fused optimizer updates keep the plain rule: the cast lives for its region.
TEST(KeptCasts, OnlyForParametersOfAFusedStep) {
  Model m = make_model();
  optim::SGD opt(m.params(), optim::SGDOptions(0.05).fused(false));
  train(m, opt, 3, false);
  EXPECT_NE(cast_in_region(m.w1).data_ptr(), cast_in_region(m.w1).data_ptr());
}

}  // namespace
}  // namespace ember::testing
