// Custom autograd functions (autograd::Function, as torch::autograd::Function): non-tensor
// arguments, saved inputs and outputs, several outputs (one non-differentiable), an output that
// is an input, double backward, and the errors PyTorch gives.
#include "ember/autograd/engine.h"
#include "ember/autograd/function.h"
#include "ember/autograd/gradcheck.h"
#include "test_util.h"

namespace ember::testing {
namespace {

using autograd::AutogradContext;

struct MulConstant : autograd::Function<MulConstant> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double c) {
    ctx->saved_data["c"] = c;
    return x * c;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {grads[0] * std::any_cast<double>(ctx->saved_data["c"]), Tensor()};
  }
};

// exp, saving its output; backward in differentiable ops, so a second derivative exists.
struct Exp : autograd::Function<Exp> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {grads[0] * ctx->get_saved_variables()[0]};
  }
};

// x @ w + b, saving its inputs; each gradient only when needed.
struct Linear : autograd::Function<Linear> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
    ctx->save_for_backward({x, w});
    return x.matmul(w) + b;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    std::vector<Tensor> saved = ctx->get_saved_variables();
    const Tensor& g = grads[0];
    return {ctx->needs_input_grad(0) ? g.matmul(saved[1].t()) : Tensor(),
            ctx->needs_input_grad(1) ? saved[0].t().matmul(g) : Tensor(),
            ctx->needs_input_grad(2) ? g.sum({0}) : Tensor()};
  }
};

// (relu(x), x > 0 as a float mask marked non-differentiable, argmax of x as int64).
struct ReluWithMask : autograd::Function<ReluWithMask> {
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& x) {
    Tensor mask = (x > 0).to(x.dtype());
    ctx->save_for_backward({mask});
    ctx->mark_non_differentiable({mask});
    return {x * mask, mask, x.argmax()};
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    EXPECT_EQ(grads.size(), 3u);
    EXPECT_TRUE(grads[1].equal(zeros_like(grads[1])));  // the unused mask's: zeros
    return {grads[0] * ctx->get_saved_variables()[0]};
  }
};

struct Identity : autograd::Function<Identity> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {grads[0] * 2}; }
};

TEST(Function, NonTensorArgumentsAndSavedData) {
  Tensor x = tensor({1.0, -2.0, 3.0}).requires_grad_();
  Tensor y = MulConstant::apply(x, 2.5);
  EXPECT_CLOSE(y, tensor({2.5, -5.0, 7.5}));
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulConstantBackward");
  y.sum().backward();
  EXPECT_CLOSE(x.grad(), full({3}, 2.5));
  // No input requires grad, or grad mode is off: nothing is recorded.
  EXPECT_TRUE(MulConstant::apply(tensor({1.0}), 2.0).grad_fn() == nullptr);
  NoGradGuard no_grad;
  EXPECT_TRUE(MulConstant::apply(x, 2.0).grad_fn() == nullptr);
}

TEST(Function, GradcheckAndGradgradcheck) {
  manual_seed(2);
  Tensor x = randn({3, 4}, kFloat64).requires_grad_(), w = randn({4, 2}, kFloat64).requires_grad_(),
         b = randn({2}, kFloat64).requires_grad_();
  auto exp_fn = [](const std::vector<Tensor>& t) { return Exp::apply(t[0]); };
  EXPECT_TRUE(autograd::gradcheck(exp_fn, {x}));
  EXPECT_TRUE(autograd::gradgradcheck(exp_fn, {x}));
  EXPECT_TRUE(autograd::gradcheck([](const auto& t) { return Linear::apply(t[0], t[1], t[2]); }, {x, w, b}));
  EXPECT_TRUE(autograd::gradcheck([](const auto& t) { return MulConstant::apply(t[0], -1.5); }, {x}));
}

TEST(Function, NeedsInputGradSkipsWhatIsNotNeeded) {
  Tensor x = randn({3, 4}), w = randn({4, 2}).requires_grad_(), b = randn({2});
  Tensor y = Linear::apply(x, w, b);
  std::vector<Tensor> g = autograd::grad({y.sum()}, {w});
  EXPECT_CLOSE(g[0], x.t().matmul(ones({3, 2})));
}

TEST(Function, SeveralOutputsWithNonDifferentiableOnes) {
  Tensor x = tensor({-1.0f, 2.0f, 0.5f}).requires_grad_();
  std::vector<Tensor> out = ReluWithMask::apply(x);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());  // marked
  EXPECT_FALSE(out[2].requires_grad());  // int64
  EXPECT_EQ(out[2].item<int64_t>(), 1);
  (out[0] * 3).sum().backward();
  EXPECT_CLOSE(x.grad(), tensor({0.0f, 3.0f, 3.0f}));
}

TEST(Function, AnOutputThatIsAnInputLeavesTheInputALeaf) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = Identity::apply(x);
  EXPECT_FALSE(y.is_same(x));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.grad_fn() == nullptr);
  y.sum().backward();
  EXPECT_CLOSE(x.grad(), tensor({2.0, 2.0}));
}

// What forward and backward saw of autocast (CPU regions, bfloat16).
struct Seen {
  ScalarType input_dtype = kFloat64;
  bool forward_autocast = true, backward_autocast = false;
  ScalarType backward_dtype = kFloat64;
};
Seen seen;

// x @ w, its backward through the same matmuls; declared for float32 (cast_inputs) or for the
// region's dtype (without).
template <class Self>
struct MatmulBase : autograd::Function<Self> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    seen.input_dtype = x.dtype();
    seen.forward_autocast = amp::is_autocast_enabled(kCPU);
    ctx->save_for_backward({x, w});
    return x.matmul(w);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    seen.backward_autocast = amp::is_autocast_enabled(kCPU);
    const std::vector<Tensor> s = ctx->get_saved_variables();
    const Tensor gx = grads[0].matmul(s[1].t()), gw = s[0].t().matmul(grads[0]);
    seen.backward_dtype = gx.dtype();
    return {gx, gw};
  }
};
struct Float32Matmul : MatmulBase<Float32Matmul> {
  static constexpr amp::CustomFwd custom_fwd{kCPU, kFloat32};
  static constexpr amp::CustomBwd custom_bwd{kCPU};
};
struct RegionMatmul : MatmulBase<RegionMatmul> {
  static constexpr amp::CustomFwd custom_fwd{kCPU};
  static constexpr amp::CustomBwd custom_bwd{kCPU};
};

// torch.amp.custom_fwd / custom_bwd: with cast_inputs, forward runs in float32 with autocast off
// and so does backward, the gradients coming back in the inputs' dtypes; without, forward runs in
// the region and backward, though called after the region, runs in it too.
TEST(Function, CustomFwdAndBwdFollowPyTorchsAutocastRules) {
  const Tensor x = random_tensor({4, 3}, kFloat32), w = random_tensor({3, 5}, kFloat32);
  const Tensor xb = x.to(kBFloat16).requires_grad_(), wf = w.clone().requires_grad_();
  Tensor y;
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    y = Float32Matmul::apply(xb, wf);
    EXPECT_TRUE(amp::is_autocast_enabled(kCPU));  // restored after apply
  }
  EXPECT_EQ(seen.input_dtype, kFloat32);
  EXPECT_FALSE(seen.forward_autocast);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_CLOSE(y, xb.detach().to(kFloat32).matmul(w));
  y.sum().backward();
  EXPECT_FALSE(seen.backward_autocast);
  EXPECT_EQ(seen.backward_dtype, kFloat32);
  EXPECT_EQ(xb.grad().dtype(), kBFloat16);
  EXPECT_CLOSE(wf.grad(), xb.detach().to(kFloat32).t().matmul(ones({4, 5})));

  const Tensor xr = x.clone().requires_grad_(), wr = w.clone().requires_grad_();
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    y = RegionMatmul::apply(xr, wr);
  }
  EXPECT_EQ(seen.input_dtype, kFloat32);  // not cast
  EXPECT_TRUE(seen.forward_autocast);
  EXPECT_EQ(y.dtype(), kBFloat16);  // forward's matmul autocast
  y.sum().backward();               // outside the region
  EXPECT_TRUE(seen.backward_autocast);
  EXPECT_EQ(seen.backward_dtype, kBFloat16);  // backward's matmuls autocast too
  EXPECT_EQ(xr.grad().dtype(), kFloat32);
  // Outside any region nothing changes.
  y = Float32Matmul::apply(x.to(kBFloat16), w.to(kBFloat16));
  EXPECT_EQ(seen.input_dtype, kBFloat16);
  EXPECT_FALSE(seen.forward_autocast);
}

struct TooFewGradients : autograd::Function<TooFewGradients> {
  static Tensor forward(AutogradContext*, const Tensor& x, double) { return x * 2; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {grads[0]}; }
};
struct GradientForANumber : autograd::Function<GradientForANumber> {
  static Tensor forward(AutogradContext*, const Tensor& x, double) { return x * 2; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) {
    return {grads[0], grads[0]};
  }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x.sum(); }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {grads[0]}; }
};
struct ModifiesItsInput : autograd::Function<ModifiesItsInput> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x.mul_(2); }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {grads[0]}; }
};

TEST(Function, ErrorsNameTheFunction) {
  Tensor x = ones({2, 3}).requires_grad_();
  EXPECT_EMBER_ERROR(TooFewGradients::apply(x, 1.0).sum().backward(), "TooFewGradientsBackward",
                     "returned 1 gradients, expected 2");
  EXPECT_EMBER_ERROR(GradientForANumber::apply(x, 1.0).sum().backward(), "GradientForANumberBackward",
                     "argument 1", "not a tensor");
  EXPECT_EMBER_ERROR(WrongShape::apply(x).backward(), "WrongShapeBackward", "invalid gradient", "[2, 3]");
  Tensor h = ones({2}).requires_grad_() * 1;  // not a leaf: mul_ in no-grad forward is allowed
  EXPECT_EMBER_ERROR(ModifiesItsInput::apply(h), "ModifiesItsInputBackward", "in place", "mark_dirty");
  // A saved tensor changed in place after the forward.
  Tensor z = ones({2}, kFloat64).requires_grad_() * 1;
  Tensor y = Exp::apply(z);
  {
    NoGradGuard no_grad;
    y.add_(1);
  }
  EXPECT_EMBER_ERROR(y.sum().backward(), "ExpBackward");
  EXPECT_EMBER_ERROR(AutogradContext().get_saved_variables(), "get_saved_variables", "backward");
}

}  // namespace
}  // namespace ember::testing
