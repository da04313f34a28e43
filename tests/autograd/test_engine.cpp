#include "ember/core/profiler.h"
#include "test_util.h"

namespace ember::testing {

Tensor leaf(std::initializer_list<double> v) {
  return tensor(NestedList(std::vector<double>(v)), kFloat64).requires_grad_();
}

TEST(Autograd, GradientsOfASimpleGraph) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x + x * 3).sum();  // dy/dx = 2x + 3
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "sum");
  y.backward();
  EXPECT_CLOSE(x.grad(), tensor({5.0, 7.0, 9.0}, kFloat64));
}

TEST(Autograd, LeafGradientsAccumulateAcrossUsesAndCalls) {
  Tensor x = leaf({1, 2});
  Tensor y = (x * 2 + x.exp()).sum();
  y.backward({}, /*retain_graph=*/true);
  Tensor once = x.grad().clone();
  EXPECT_CLOSE(once, 2 + exp(x.detach()));
  y.backward();
  EXPECT_CLOSE(x.grad(), once * 2);
}

// A leaf takes the gradient it is given without a copy only when nothing else holds it: a
// view of the caller's gradient (reshape's backward) shares the caller's storage, so taking it
// would make the next accumulation write into the caller's tensor.
TEST(Autograd, LeafGradientsNeverShareStorage) {
  Tensor a = leaf({1, 2, 3, 4});
  Tensor y = a.view({2, 2});
  Tensor g = ones({2, 2}, kFloat64);
  y.backward(g, /*retain_graph=*/true);
  y.backward(g);
  EXPECT_CLOSE(a.grad(), full({4}, 2.0, kFloat64));
  EXPECT_CLOSE(g, ones({2, 2}, kFloat64)) << "the caller's gradient was accumulated into";
  // A linear's weight enters the product transposed; its gradient arrives in the weight's own
  // layout (computed transposed), before any accumulation could lay it out.
  Tensor w = randn({5, 3}, kFloat64).requires_grad_();
  bool contiguous = false;
  w.register_hook([&](const Tensor& grad) {
    contiguous = grad.is_contiguous();
    return Tensor();
  });
  mm(randn({4, 3}, kFloat64), w.t()).sum().backward();
  EXPECT_TRUE(contiguous);
}

// The parts of a split whose gradients already lie side by side in one buffer, as cuDNN's
// attention writes those of q, k and v: the whole's gradient is that buffer, with no
// concatenation; gradients anywhere else are concatenated.
TEST(Autograd, SplitGradientsAlreadyAdjacentAreNotConcatenated) {
  Tensor whole_grad = randn({2, 6}, kFloat64);
  for (bool adjacent : {true, false}) {
    SCOPED_TRACE(adjacent);
    Tensor x = randn({2, 6}, kFloat64).requires_grad_();
    Tensor seen;
    x.register_hook([&seen](const Tensor& g) {
      seen = g;
      return Tensor();
    });
    std::vector<Tensor> parts = x.chunk(3, 1);
    for (int64_t i = 0; i < 3; ++i)
      parts[static_cast<size_t>(i)].register_hook([&, i](const Tensor&) {
        Tensor g = whole_grad.narrow(1, 2 * i, 2);
        return adjacent ? g : g.clone();
      });
    (parts[0].sum() + parts[1].sum() + parts[2].sum()).backward();
    EXPECT_CLOSE(x.grad(), whole_grad);
    EXPECT_EQ(seen.data_ptr() == whole_grad.data_ptr(), adjacent);
  }
  // Under create_graph the concatenation is recorded, so the gradient has a history.
  Tensor x = randn({2, 6}, kFloat64).requires_grad_();
  std::vector<Tensor> parts = x.chunk(2, 1);
  Tensor g = autograd::grad({(parts[0] * parts[0]).sum() + (parts[1] * parts[1]).sum()}, {x}, {},
                            /*retain_graph=*/true, /*create_graph=*/true)[0];
  EXPECT_CLOSE(g, x.detach() * 2);
  EXPECT_TRUE(g.requires_grad());
}

// A residual add hands its gradient on as it is (alpha 1: no pass over it); alpha scales b's.
TEST(Autograd, AddPassesItsGradientOn) {
  Tensor a = randn({3}, kFloat64).requires_grad_(), b = randn({3}, kFloat64).requires_grad_();
  Tensor g = tensor({1.0, 2.0, 3.0}, kFloat64);
  Tensor y = a + b;
  profiler::Profile prof(std::vector{profiler::ProfilerActivity::CPU});
  y.backward(g);
  prof.stop();
  EXPECT_EQ(prof.key_averages().find("binary"), nullptr) << prof.key_averages().table("count");
  EXPECT_CLOSE(a.grad(), g);
  EXPECT_CLOSE(b.grad(), g);
  Tensor c = randn({3}, kFloat64).requires_grad_();
  a.add(c, 2.0).backward(g);
  EXPECT_CLOSE(c.grad(), g * 2);
  a.sub(c, 0.5).backward(g);
  EXPECT_CLOSE(c.grad(), g * 1.5);
}

// 2 * h, recorded as an op whose backward adds its gradient into the one h already has when the
// engine offers it; `offered` counts the offers.
Tensor twice_accumulating(const Tensor& h, int* offered) {
  Tensor out = h.detach() * 2;
  record("twice", {h}, {out}, [offered](const GradContext& g) -> std::vector<Tensor> {
    if (!g.accumulated(0).defined()) return {g.grad() * 2};
    ++*offered;
    Tensor sum = g.take_accumulated(0);
    sum.add_(g.grad(), 2);
    return {sum};
  });
  return out;
}

// h feeds `twice` and then a later op, whose backward runs first: `twice` is offered that
// gradient only where the engine alone holds it, and h's gradient is the sum either way.
TEST(Autograd, ABackwardMayAddItsGradientIntoTheOneItsInputHas) {
  Tensor x = leaf({1, 2, 3});
  int offered = 0;
  Tensor h = x * 1;
  Tensor first = twice_accumulating(h, &offered);  // made first: its backward runs last
  Tensor y = (first + h * 3).sum();
  y.backward();
  EXPECT_EQ(offered, 1);
  EXPECT_CLOSE(x.grad(), tensor({5.0, 5.0, 5.0}, kFloat64));

  // The later consumer passes its gradient on as it is (a view of the caller's): not offered.
  Tensor g = tensor({1.0, 2.0, 3.0}, kFloat64);
  Tensor h2 = x * 1;
  Tensor first2 = twice_accumulating(h2, &offered);
  std::vector<Tensor> r = autograd::grad({first2 + h2.view({3})}, {x}, {g}, /*retain_graph=*/false);
  EXPECT_EQ(offered, 1);
  EXPECT_CLOSE(r[0], g * 3);
  EXPECT_CLOSE(g, tensor({1.0, 2.0, 3.0}, kFloat64));

  // Nor under create_graph, where the sum must be differentiable.
  Tensor h3 = x * x;
  Tensor first3 = twice_accumulating(h3, &offered);
  std::vector<Tensor> d =
      autograd::grad({(first3 + h3 * 3).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  EXPECT_EQ(offered, 1);
  EXPECT_CLOSE(d[0], x.detach() * 10);
}

// A backward that takes the offered gradient must return it.
TEST(Autograd, ABackwardThatTakesAnAccumulatedGradientMustReturnIt) {
  Tensor x = leaf({1, 2});
  Tensor h = x * 1;
  Tensor out = h.detach() * 2;
  record("drops", {h}, {out}, [](const GradContext& g) -> std::vector<Tensor> {
    if (g.accumulated(0).defined()) g.take_accumulated(0);
    return {Tensor()};
  });
  Tensor y = (out + h * 3).sum();
  EXPECT_EMBER_ERROR(y.backward(), "backward of drops", "took the gradient input 0 had received");
}

// 2 * h, whose backward gives the row sums of h's gradient where h's node asks for them.
Tensor twice_with_row_sums(const Tensor& h) {
  Tensor out = h.detach() * 2;
  record("twice_with_row_sums", {h}, {out}, [](const GradContext& g) -> std::vector<Tensor> {
    Tensor gh = g.grad() * 2;
    if (g.row_sums_wanted(0)) g.set_row_sums(0, gh.sum({0}));
    return {gh};
  });
  return out;
}

// Row sums reach the node that asks only with a gradient that arrived alone and that no hook saw.
TEST(Autograd, RowSumsTravelWithAGradientThatArrivesAlone) {
  Tensor x = randn({4, 3}, kFloat64).requires_grad_(), w = randn({4, 3}, kFloat64);
  RowSumsSeen seen;
  Tensor t = asking_for_row_sums(x * 1, &seen);
  (twice_with_row_sums(t) * w).sum().backward();
  ASSERT_TRUE(seen.sums.defined());
  EXPECT_CLOSE(seen.sums, (w * 2).sum({0}));
  EXPECT_CLOSE(seen.grad, w * 2);

  // A second consumer: the sum of the two gradients has no row sums.
  Tensor t2 = asking_for_row_sums(x * 1, &seen);
  ((twice_with_row_sums(t2) * w).sum() + (t2 * 3).sum()).backward();
  EXPECT_FALSE(seen.sums.defined());
  EXPECT_CLOSE(seen.grad, w * 2 + 3);

  // A hook on the asking node's output may change the gradient: no row sums.
  Tensor t3 = asking_for_row_sums(x * 1, &seen);
  t3.register_hook([](const Tensor& g) { return g * 10; });
  (twice_with_row_sums(t3) * w).sum().backward();
  EXPECT_FALSE(seen.sums.defined());
  EXPECT_CLOSE(seen.grad, w * 20);
}

// A view that keeps the last dim passes the row sums on (the head's logits viewed as [N, C] for
// cross_entropy); one that changes it does not ask for them.
TEST(Autograd, RowSumsPassThroughAViewThatKeepsTheLastDim) {
  Tensor x = randn({2, 4, 3}, kFloat64).requires_grad_(), w = randn({8, 3}, kFloat64);
  RowSumsSeen seen;
  Tensor t = asking_for_row_sums(x * 1, &seen);
  (twice_with_row_sums(t.view({8, 3})) * w).sum().backward();
  ASSERT_TRUE(seen.sums.defined());
  EXPECT_CLOSE(seen.sums, (w * 2).sum({0}));
  EXPECT_CLOSE(seen.grad, (w * 2).view({2, 4, 3}));

  Tensor t2 = asking_for_row_sums(x * 1, &seen);
  (twice_with_row_sums(t2.view({2, 12})) * w.view({2, 12})).sum().backward();
  EXPECT_FALSE(seen.sums.defined());
  EXPECT_CLOSE(seen.grad, (w * 2).view({2, 4, 3}));
}

TEST(Autograd, BroadcastGradientsAreSummedBack) {
  Tensor a = randn({3, 1}, kFloat64).requires_grad_();
  Tensor b = randn({4}, kFloat64).requires_grad_();
  (a * b).sum().backward();
  EXPECT_CLOSE(a.grad(), b.detach().sum().expand({3, 1}).contiguous());
  EXPECT_CLOSE(b.grad(), a.detach().sum().expand({4}).contiguous());
}

TEST(Autograd, GradModeGuards) {
  Tensor x = leaf({1});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EnableGradGuard enable;
    EXPECT_TRUE((x * 2).requires_grad());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_FALSE((x.detach() * 2).requires_grad());
}

TEST(Autograd, GradReturnsWithoutTouchingDotGrad) {
  Tensor x = leaf({1, 2}), unused = leaf({5});
  Tensor y = (x * x).sum();
  std::vector<Tensor> g = autograd::grad({y}, {x, unused}, {}, false, false, /*allow_unused=*/true);
  EXPECT_CLOSE(g[0], tensor({2.0, 4.0}, kFloat64));
  EXPECT_FALSE(g[1].defined());
  EXPECT_FALSE(x.grad().defined());
  Tensor y2 = (x * x).sum();
  EXPECT_EMBER_ERROR(autograd::grad({y2}, {unused}), "grad", "not to have been used");
}

TEST(Autograd, SecondDerivativesThroughCreateGraph) {
  Tensor x = leaf({2, -1});
  Tensor y = (x * x * x).sum();
  Tensor dx = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true)[0];  // 3x^2
  EXPECT_CLOSE(dx, tensor({12.0, 3.0}, kFloat64));
  EXPECT_TRUE(dx.requires_grad());
  Tensor d2 = autograd::grad({dx.sum()}, {x})[0];  // 6x
  EXPECT_CLOSE(d2, tensor({12.0, -6.0}, kFloat64));
  // Through a saved output: d/dx exp(x) = exp(x), again and again.
  Tensor z = leaf({0.5});
  Tensor e = z.exp();
  Tensor de = autograd::grad({e.sum()}, {z}, {}, false, true)[0];
  Tensor dde = autograd::grad({de.sum()}, {z})[0];
  EXPECT_CLOSE(dde, tensor({std::exp(0.5)}, kFloat64));
}

TEST(Autograd, HooksAndRetainGrad) {
  Tensor x = leaf({1, 2});
  x.register_hook([](const Tensor& g) { return g * 10; });
  int accumulated = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) { accumulated += t.grad().defined(); });
  Tensor h = x * 3;
  h.retain_grad();
  h.register_hook([](const Tensor& g) { return g * 2; });
  int ended = 0;
  Tensor y = h.sum();
  y.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] { ++ended; });
    return Tensor();
  });
  y.backward();
  EXPECT_CLOSE(h.grad(), tensor({2.0, 2.0}, kFloat64));    // after its hook
  EXPECT_CLOSE(x.grad(), tensor({60.0, 60.0}, kFloat64));  // 2 * 3, then the leaf hook's 10
  EXPECT_EQ(accumulated, 1);
  EXPECT_EQ(ended, 1);
  EXPECT_EMBER_ERROR(autograd::queue_callback([] {}), "queue_callback", "backward");
}

TEST(Autograd, AnomalyModeNamesTheOpWhoseBackwardMadeNaN) {
  Tensor x = leaf({0.0});
  Tensor y = (sqrt(x * 0) * 0).sum();  // sqrt'(0) = inf, times 0 = NaN
  autograd::DetectAnomalyGuard guard;
  EXPECT_EMBER_ERROR(y.backward(), "anomaly", "sqrt", "NaN");
}

TEST(Autograd, ErrorsNameTheProblem) {
  Tensor x = leaf({1, 2});
  Tensor y = (x * 2).sum();
  y.backward();
  EXPECT_EMBER_ERROR(y.backward(), "backward through the graph a second time");
  EXPECT_EMBER_ERROR((x * 2).backward(), "implicitly created only for scalar outputs", "[2]");
  EXPECT_EMBER_ERROR(ones({2}).backward(), "does not require grad");
  EXPECT_EMBER_ERROR(ones({2}, kInt64).requires_grad_(), "requires_grad_", "floating point", "int64");
  EXPECT_EMBER_ERROR((x * 2).requires_grad_(false), "leaf");
  EXPECT_EMBER_ERROR(x.add_(1), "add_", "leaf tensor that requires grad");
  EXPECT_EMBER_ERROR(uniform_(x), "uniform_", "leaf tensor that requires grad");
  {
    NoGradGuard no_grad;
    x.add_(1);  // an optimizer's update
  }
  EXPECT_CLOSE(x.detach(), tensor({2.0, 3.0}, kFloat64));
  Tensor t = leaf({1, 2, 3});
  EXPECT_EMBER_ERROR(autograd::backward({(t * 2)}, {ones({4}, kFloat64)}), "gradient of shape [4]", "[3]");
}

TEST(Autograd, ModifyingASavedTensorInPlaceIsCaught) {
  Tensor x = leaf({1, 2});
  Tensor e = x.exp();  // saves its output
  Tensor y = (e * 1).sum();
  e.detach().add_(1);  // same storage, version moves
  EXPECT_EMBER_ERROR(y.backward(), "modified by an inplace operation", "exp", "version 1",
                     "expected version 0");
}

TEST(Autograd, InPlaceOpsOnNonLeavesRecordTheirBackward) {
  Tensor x = leaf({0.5, -1.0}), z = leaf({2, 3});
  Tensor y = x * 2;
  y.mul_(z);  // needs y's old value for z's gradient: saved as a copy
  y.add_(z, 0.5);
  y.tanh_();  // saves its output (a later in-place op on y would make backward fail, as in PyTorch)
  y.sum().backward();
  Tensor xv = x.detach(), zv = z.detach();
  Tensor t = tanh(xv * 2 * zv + zv * 0.5);
  Tensor dt = 1 - t * t;
  EXPECT_CLOSE(x.grad(), dt * 2 * zv);
  EXPECT_CLOSE(z.grad(), dt * (xv * 2 + 0.5));
  EXPECT_EQ(y.grad_fn()->name(), "tanh_");
  Tensor w = x * 1;
  EXPECT_EMBER_ERROR(w[0].add_(1), "add_", "view of a tensor that requires grad");
  Tensor e = x.exp();
  Tensor uses = e * 1;
  e.add_(1);  // allowed, but exp's saved output has moved on
  EXPECT_EMBER_ERROR(uses.sum().backward(), "modified by an inplace operation", "exp");
}

TEST(Autograd, ViewsAndCopiesAreDifferentiable) {
  Tensor x = arange(12).to(kFloat64).view({3, 4}).requires_grad_();
  Tensor y = x.t().reshape({2, 6})[1].slice(0, 1, 4).sum() +
             x.select(1, 0).unsqueeze(1).expand({3, 5}).sum() + x.to(kFloat32).sum() +
             x.permute({1, 0}).clone().narrow(0, 3, 1).sum();
  y.backward();
  // Each element's gradient counts its uses: computed by hand for this chain of views.
  Tensor expected = ones({3, 4}, kFloat64);  // to(kFloat32).sum()
  expected.select(1, 0).add_(5);             // select + expand to 5 columns
  expected.select(1, 3).add_(1);             // narrow of the permuted column 3
  // x.t() is [4, 3]; reshaped to [2, 6], row 1 holds t-flat 6..11 = x.t()[2..3]; slice 1..4 -> flat 7, 8, 9
  // -> x.t()[2][1], x.t()[2][2], x.t()[3][0] -> x[1][2], x[2][2], x[0][3].
  expected[1][2].add_(1);
  expected[2][2].add_(1);
  expected[0][3].add_(1);
  EXPECT_CLOSE(x.grad(), expected);
  EXPECT_EQ(x.grad().dtype(), kFloat64);
}

// A two-layer MLP on fixed data, trained with autograd and a hand-written SGD step.
TEST(Autograd, SmallMLPLearns) {
  manual_seed(0);
  Tensor xs = randn({64, 4});
  Tensor ys = (xs.select(1, 0) * xs.select(1, 1) > 0).to(kInt64);  // XOR of two signs
  Tensor w1 = (randn({4, 32}) * 0.5).requires_grad_(), b1 = zeros({32}).requires_grad_();
  Tensor w2 = (randn({32, 2}) * 0.5).requires_grad_(), b2 = zeros({2}).requires_grad_();
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor h = relu(xs.matmul(w1) + b1);
    Tensor logits = h.matmul(w2) + b2;
    // Cross-entropy from differentiable pieces: logsumexp(l) - l[y], through exp, log, sum, where.
    Tensor picked = where(one_hot(ys, 2) == 1, logits, zeros({}, kFloat32)).sum({1});
    Tensor loss = (log(exp(logits).sum({1})) - picked).mean();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    for (const Tensor& p : {w1, b1, w2, b2}) p.set_grad(Tensor());
    loss.backward();
    NoGradGuard no_grad;
    for (const Tensor& p : {w1, b1, w2, b2}) p.sub_(p.grad(), 0.5);
  }
  EXPECT_LT(last, 0.3 * first) << "loss " << first << " -> " << last;
}

}  // namespace ember::testing
