// The fused optimizer steps (core/ops/fused_optim.h): grad_scale/found_inf, float16/bfloat16
// with float32 math, many tensors split across threads, and every input the frontends refuse.
// (Fused against per-tensor in float32/float64, bit for bit: test_optim_reference.cpp.)
#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<Tensor> copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.detach().clone());
  return out;
}

std::vector<Tensor> random_list(const std::vector<DimVector>& shapes, ScalarType dt, double low = -2,
                                double high = 2) {
  std::vector<Tensor> out;
  for (const DimVector& s : shapes) out.push_back(random_tensor(s, dt, low, high));
  return out;
}

std::vector<Tensor> steps_at(size_t n, double value) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i) out.push_back(full({}, value));
  return out;
}

void expect_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_CLOSE(a[i], b[i], Tolerance{0, 0}) << "tensor " << i;
}

// The optimizers' fused steps: scaled gradients divided by grad_scale (and stored back
// unscaled) give the unscaled step; found_inf skips everything, step counts included.
TEST(FusedOptim, GradScaleAndFoundInfThroughTheOptimizers) {
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<Make> makes = {
      [](std::vector<Tensor> ps) {
        return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.1).fused(true));
      },
      [](std::vector<Tensor> ps) {
        return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).momentum(0.9).fused(true));
      }};
  for (const Make& make : makes) {
    manual_seed(3);
    std::vector<Tensor> start = random_list({{3, 4}, {5}}, kFloat32),
                        grads = random_list({{3, 4}, {5}}, kFloat32);
    auto params = [&] {
      std::vector<Tensor> ps = copies(start);
      for (const Tensor& p : ps) p.requires_grad_();
      return ps;
    };
    std::vector<Tensor> plain = params(), scaled = params();
    std::unique_ptr<optim::Optimizer> opt_plain = make(plain), opt_scaled = make(scaled);
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < grads.size(); ++i) {
        plain[i].set_grad(grads[i].clone());
        scaled[i].set_grad(grads[i] * 1024);  // a power of two: dividing again is exact
      }
      opt_plain->step();
      // A skipped step first: found_inf leaves params, gradients and state alone (at the first
      // step the state is created, as zeros, but no step is counted).
      std::vector<Tensor> before = copies(scaled);
      StateDict state_before = opt_scaled->state_dict();
      opt_scaled->set_grad_scaling(full({}, 1024.0), full({}, 1.0));
      opt_scaled->step();
      expect_equal(scaled, before);
      EXPECT_CLOSE(scaled[0].grad(), grads[0] * 1024, Tolerance{0, 0});
      if (step > 0) {
        StateDict state_after = opt_scaled->state_dict();
        EXPECT_EQ(state_after.metadata, state_before.metadata);
        for (const auto& [key, t] : state_before.tensors)
          EXPECT_CLOSE(state_after.tensors.at(key), t, Tolerance{0, 0});
      }
      // Then the real one.
      opt_scaled->set_grad_scaling(full({}, 1024.0), full({}, 0.0));
      opt_scaled->step();
      expect_equal(scaled, plain);
      for (size_t i = 0; i < grads.size(); ++i) EXPECT_CLOSE(scaled[i].grad(), grads[i], Tolerance{0, 0});
    }
  }
}

// float16/bfloat16 update in float32 and round once: one fused step on reduced-precision tensors
// equals the same step on their float32 copies, rounded.
// lr given as a float64 tensor replaces args.lr (bit for bit); the optimizers keep one per group,
// written when the rate changes and by LR schedulers (what a CUDA graph's replays read).
TEST(FusedOptim, LrFromATensor) {
  std::vector<Tensor> p = random_list({{5, 3}, {7}}, kFloat32), g = random_list({{5, 3}, {7}}, kFloat32);
  std::vector<Tensor> m = random_list({{5, 3}, {7}}, kFloat32),
                      v = random_list({{5, 3}, {7}}, kFloat32, 0, 1);
  std::vector<Tensor> p2 = copies(p), m2 = copies(m), v2 = copies(v), buf = copies(m), buf2 = copies(m);
  FusedAdamArgs adam;
  adam.lr = 0.37;
  fused_adam_(p, g, m, v, {}, steps_at(2, 3), adam);
  FusedAdamArgs other = adam;
  other.lr = 5;
  fused_adam_(p2, g, m2, v2, {}, steps_at(2, 3), other, {}, {}, full({}, 0.37, kFloat64));
  expect_equal(p2, p);
  FusedSgdArgs sgd;
  sgd.lr = 0.21;
  sgd.momentum = 0.9;
  fused_sgd_(p, g, buf, sgd);
  FusedSgdArgs sgd_other = sgd;
  sgd_other.lr = 3;
  fused_sgd_(p2, g, buf2, sgd_other, {}, {}, full({}, 0.21, kFloat64));
  expect_equal(p2, p);
  expect_equal(buf2, buf);
  EXPECT_EMBER_ERROR(fused_sgd_(p, g, buf, sgd, {}, {}, full({}, 0.1)),
                     "fused_sgd_: lr must be a float64 tensor with one element, got float32");

  Tensor w = ones({3}).requires_grad_();
  optim::AdamW opt({w}, optim::AdamWOptions(0.1).fused(true));
  EXPECT_FALSE(opt.param_groups()[0].lr_tensor().defined());
  w.set_grad(ones({3}));
  opt.step();
  EXPECT_EQ(opt.param_groups()[0].lr_tensor().item<double>(), 0.1);
  optim::StepLR sched(opt, 1, 0.5);
  sched.step();
  EXPECT_EQ(opt.param_groups()[0].lr_tensor().item<double>(), 0.05);
  opt.param_groups()[0].options().set_lr(0.2);
  opt.step();
  EXPECT_EQ(opt.param_groups()[0].lr_tensor().item<double>(), 0.2);
}

TEST(FusedOptim, ReducedPrecisionUsesFloat32Math) {
  const std::vector<DimVector> shapes = {{33}, {4, 5}};
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(to_string(dt));
    manual_seed(11);
    std::vector<Tensor> p = random_list(shapes, dt), g = random_list(shapes, dt),
                        m = random_list(shapes, dt, -1, 1), v = random_list(shapes, dt, 0.5, 2),
                        vmax = random_list(shapes, dt, 0.5, 2);
    auto f32 = [](const std::vector<Tensor>& ts) {
      std::vector<Tensor> out;
      for (const Tensor& t : ts) out.push_back(t.to(kFloat32));
      return out;
    };
    auto rounded = [dt](const std::vector<Tensor>& ts) {
      std::vector<Tensor> out;
      for (const Tensor& t : ts) out.push_back(t.to(dt));
      return out;
    };
    FusedAdamArgs adam{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .decoupled_weight_decay = true};
    std::vector<Tensor> p32 = f32(p), m32 = f32(m), v32 = f32(v), vmax32 = f32(vmax);
    fused_adam_(p32, f32(g), m32, v32, vmax32, steps_at(2, 4), adam);
    fused_adam_(p, g, m, v, vmax, steps_at(2, 4), adam);
    expect_equal(p, rounded(p32));
    expect_equal(m, rounded(m32));
    expect_equal(v, rounded(v32));
    expect_equal(vmax, rounded(vmax32));

    FusedSgdArgs sgd{.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01};
    std::vector<Tensor> buf = copies(m), buf32 = f32(m);
    p32 = f32(p);
    fused_sgd_(p32, f32(g), buf32, sgd);
    fused_sgd_(p, g, buf, sgd);
    expect_equal(p, rounded(p32));
    expect_equal(buf, rounded(buf32));
  }
}

// Tensors of many sizes (empty ones included) in one call: the elements are split over the
// threads regardless of tensor boundaries, and each tensor keeps its own step count.
TEST(FusedOptim, ManyTensorsInOnePass) {
  const std::vector<DimVector> shapes = {{0}, {1}, {70001}, {5, 3}, {0, 2}, {33000}, {100003}, {}};
  manual_seed(5);
  std::vector<Tensor> p = random_list(shapes, kFloat32), g = random_list(shapes, kFloat32),
                      m = random_list(shapes, kFloat32, -1, 1), v = random_list(shapes, kFloat32, 0, 2);
  std::vector<Tensor> steps;
  for (size_t i = 0; i < shapes.size(); ++i) steps.push_back(full({}, static_cast<double>(i)));
  FusedAdamArgs args{.lr = 0.05, .beta1 = 0.8, .weight_decay = 0.01};
  std::vector<Tensor> want_p = copies(p), want_m = copies(m), want_v = copies(v);
  for (size_t i = 0; i < shapes.size(); ++i) {  // one tensor per call: no splitting across tensors
    std::vector<Tensor> vmax;
    fused_adam_({want_p[i]}, {g[i]}, {want_m[i]}, {want_v[i]}, vmax, {full({}, static_cast<double>(i))},
                args);
  }
  fused_adam_(p, g, m, v, {}, steps, args);
  expect_equal(p, want_p);
  expect_equal(m, want_m);
  expect_equal(v, want_v);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].item<double>(), static_cast<double>(i + 1));
}

// A group mixing dtypes is split into one fused call per dtype; each agrees with the per-tensor
// step bit for bit.
TEST(FusedOptim, GroupsMixingDtypes) {
  for (bool sgd : {false, true}) {
    manual_seed(6);
    std::vector<Tensor> start = {random_tensor({5}, kFloat32), random_tensor({2, 2}, kFloat64),
                                 random_tensor({3}, kFloat32)};
    std::vector<Tensor> fused = copies(start), plain = copies(start);
    for (const Tensor& t : fused) t.requires_grad_();
    for (const Tensor& t : plain) t.requires_grad_();
    auto make = [&](std::vector<Tensor> ps, bool f) -> std::unique_ptr<optim::Optimizer> {
      if (sgd) return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).momentum(0.9).fused(f));
      return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.1).fused(f));
    };
    std::unique_ptr<optim::Optimizer> opt_fused = make(fused, true), opt_plain = make(plain, false);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < start.size(); ++i) {
        Tensor g = random_tensor(start[i].sizes(), start[i].dtype());
        fused[i].set_grad(g.clone());
        plain[i].set_grad(g);
      }
      opt_fused->step();
      opt_plain->step();
    }
    expect_equal(fused, plain);
  }
}

TEST(FusedOptim, RefusesBadInputs) {
  auto list = [](std::initializer_list<DimVector> shapes, ScalarType dt = kFloat32) {
    std::vector<Tensor> out;
    for (const DimVector& s : shapes) out.push_back(zeros(s, dt));
    return out;
  };
  std::vector<Tensor> p = list({{2, 3}, {4}}), g = list({{2, 3}, {4}}), m = list({{2, 3}, {4}}),
                      v = list({{2, 3}, {4}}), none, steps = steps_at(2, 0);
  const FusedAdamArgs adam;
  fused_adam_({}, {}, {}, {}, {}, {}, adam);  // nothing to do
  fused_adam_(p, g, m, v, none, steps, adam);

  EXPECT_EMBER_ERROR(fused_adam_(p, list({{2, 3}}), m, v, none, steps, adam),
                     "fused_adam_: grads has 1 tensors, params has 2");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, list({{2, 3}, {5}}), v, none, steps, adam),
                     "fused_adam_: exp_avgs[1] has shape [5], params[1] has shape [4]");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, list({{2, 3}, {4}}, kFloat64), none, steps, adam),
                     "fused_adam_: exp_avg_sqs[0] has dtype float64, params[0] has dtype float32");
  EXPECT_EMBER_ERROR(fused_adam_(p, {g[0], Tensor()}, m, v, none, steps, adam),
                     "fused_adam_: grads[1] is undefined");
  EXPECT_EMBER_ERROR(fused_adam_(p, {zeros({3, 2}).t(), g[1]}, m, v, none, steps, adam),
                     "fused_adam_: grads[0] (shape [2, 3], strides [1, 2]) must be contiguous");
  EXPECT_EMBER_ERROR(fused_adam_({p[0], zeros({4}, kFloat64)}, g, m, v, none, steps, adam),
                     "fused_adam_: all params must share one dtype and device", "params[1] is float64");
  EXPECT_EMBER_ERROR(fused_adam_(list({{2}}, kInt64), list({{2}}, kInt64), list({{2}}, kInt64),
                                 list({{2}}, kInt64), none, steps_at(1, 0), adam),
                     "fused_adam_: params must be floating point, params[0] is int64");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, m, steps, adam),
                     "fused_adam_: max_exp_avg_sqs must be empty without "
                     "amsgrad, it has 2 tensors");
  FusedAdamArgs ams = adam;
  ams.amsgrad = true;
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, steps, ams), "fused_adam_: max_exp_avg_sqs has 0 tensors");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, steps_at(1, 0), adam),
                     "fused_adam_: state_steps has 1 tensors");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, {full({}, 0.0), full({}, 0.0, kFloat64)}, adam),
                     "fused_adam_: each state step must be a float32 tensor with one element, got float64");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, {full({}, 0.0), zeros({2})}, adam),
                     "each state step must be a float32 tensor with one element", "shape [2]");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, {full({}, 0.0), Tensor()}, adam),
                     "fused_adam_: each state step is undefined");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, steps, adam, full({}, 2.0, kFloat16)),
                     "fused_adam_: grad_scale must be a float32 tensor with one element, got float16");
  EXPECT_EMBER_ERROR(fused_adam_(p, g, m, v, none, steps, adam, Tensor(), zeros({3})),
                     "fused_adam_: found_inf must be a float32 tensor with one element", "shape [3]");
  Tensor leaf = zeros({2, 3}).requires_grad_();
  EXPECT_EMBER_ERROR(fused_adam_({leaf, p[1]}, g, m, v, none, steps, adam),
                     "fused_adam_: a leaf tensor that requires grad is being used in an in-place operation");
  {
    NoGradGuard no_grad;
    fused_adam_({leaf, p[1]}, g, m, v, none, steps, adam);
  }

  const Tensor no_scale;
  auto with_copies = [&](ArrayRef<Tensor> c) {
    fused_adam_(p, g, m, v, none, steps, adam, no_scale, no_scale, no_scale, c);
  };
  EXPECT_EMBER_ERROR(with_copies(list({{2, 3}}, kBFloat16)),
                     "fused_adam_: param_copies has 1 tensors, params has 2");
  EXPECT_EMBER_ERROR(
      with_copies(list({{2, 3}, {4}})),
      "fused_adam_: param_copies must be all float16 or all bfloat16, param_copies[0] is float32");
  EXPECT_EMBER_ERROR(with_copies({zeros({2, 3}, kBFloat16), zeros({4}, kFloat16)}),
                     "param_copies[1] is float16");
  EXPECT_EMBER_ERROR(with_copies({Tensor(), zeros({5}, kBFloat16)}),
                     "fused_adam_: param_copies[1] has shape [5], params[1] has shape [4]");
  EXPECT_EMBER_ERROR(with_copies({zeros({3, 2}, kBFloat16).t(), Tensor()}),
                     "fused_adam_: param_copies[0] (shape [2, 3], strides [1, 2]) must be contiguous");

  const FusedSgdArgs sgd, momentum{.momentum = 0.9};
  EXPECT_EMBER_ERROR(fused_sgd_(list({{2}}, kFloat64), list({{2}}, kFloat64), {}, sgd, no_scale, no_scale,
                                no_scale, list({{2}}, kBFloat16)),
                     "fused_sgd_: param_copies are of float32 params, params[0] is float64");
  fused_sgd_(p, g, {}, sgd);
  fused_sgd_(p, g, m, momentum);
  EXPECT_EMBER_ERROR(fused_sgd_(p, g, m, sgd),
                     "fused_sgd_: momentum_buffers must be empty when momentum is 0, it "
                     "has 2 tensors");
  EXPECT_EMBER_ERROR(fused_sgd_(p, g, {}, momentum),
                     "fused_sgd_: momentum_buffers has 0 tensors, params has 2");
  EXPECT_EMBER_ERROR(fused_sgd_(p, list({{2, 3}, {4, 1}}), {}, sgd), "fused_sgd_: grads[1] has shape [4, 1]");
  EXPECT_EMBER_ERROR(fused_sgd_(p, g, {}, sgd, zeros({1}, kInt32)),
                     "fused_sgd_: grad_scale must be a float32");
  EXPECT_EMBER_ERROR(fused_sgd_({Tensor()}, {Tensor()}, {}, sgd), "fused_sgd_: params[0] is undefined");
}

// param_copies: each copy ends as its param's new value cast to its dtype (one param has none);
// the params and state move as without copies, and a skipped step (found_inf) moves nothing.
TEST(FusedOptim, ParamCopiesAreTheCastsOfTheNewValues) {
  const std::vector<DimVector> shapes = {{70000}, {3, 5}, {0}, {}, {33}};
  for (ScalarType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(to_string(dt));
    manual_seed(9);
    std::vector<Tensor> p = random_list(shapes, kFloat32), g = random_list(shapes, kFloat32),
                        m = random_list(shapes, kFloat32), v = random_list(shapes, kFloat32, 0.5, 2);
    std::vector<Tensor> p2 = copies(p), m2 = copies(m), v2 = copies(v), c;
    for (size_t i = 0; i < shapes.size(); ++i) c.push_back(i == 1 ? Tensor() : full(shapes[i], 3.0, dt));
    auto expect_casts = [&] {
      for (size_t i = 0; i < shapes.size(); ++i)
        if (c[i].defined()) {
          EXPECT_CLOSE(c[i], p[i].to(dt), Tolerance{0, 0}) << "copy " << i;
        }
    };
    const Tensor none;
    const FusedAdamArgs adam{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true};
    fused_adam_(p, g, m, v, {}, steps_at(shapes.size(), 2), adam, none, none, none, c);
    fused_adam_(p2, g, m2, v2, {}, steps_at(shapes.size(), 2), adam);
    expect_equal(p, p2);
    expect_equal(m, m2);
    expect_casts();
    c[0].fill_(0);
    fused_adam_(p, g, m, v, {}, steps_at(shapes.size(), 2), adam, none, full({}, 1.0), none, c);
    expect_equal(p, p2);
    EXPECT_EQ(c[0].abs().max().item<float>(), 0.0f);  // skipped: not even the copies

    std::vector<Tensor> buf = random_list(shapes, kFloat32), buf2 = copies(buf);
    const FusedSgdArgs sgd{.lr = 0.1, .momentum = 0.9, .nesterov = true};
    fused_sgd_(p, g, buf, sgd, none, none, none, c);
    fused_sgd_(p2, g, buf2, sgd);
    expect_equal(p, p2);
    expect_casts();
  }
}

}  // namespace
}  // namespace ember::testing
