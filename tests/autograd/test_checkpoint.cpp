// Checkpointing (autograd/checkpoint.h, nn/checkpoint.h) and the saved-tensor hooks under it.
// The reference for every checkpointed run is the same computation without checkpointing: on the
// CPU in float32 the gradients must be equal bit for bit (same kernels on the same values, and
// the same dropout masks because the recomputation replays the forward's RNG states).
#include <atomic>

#include "test_util.h"

namespace ember::testing {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

Tolerance exact() { return {0, 0}; }

// A fixed, uneven output gradient: (out * weights).sum() with weights = cos(0.3 * i).
Tensor weighted_sum(const Tensor& out) {
  Tensor w = (arange(out.numel(), out.dtype()) * 0.3).cos().reshape(out.sizes());
  return (out * w).sum();
}

struct Outcome {
  Tensor out;
  std::vector<Tensor> grads;  // the input's, then each parameter's
};

// fn(x) from the same generator states each time, then backward of weighted_sum.
Outcome run_model(nn::Module& m, const Fn& fn, const Tensor& x0, bool input_requires_grad = true) {
  manual_seed(7);
  m.zero_grad();
  Tensor x = x0.detach().clone().requires_grad_(input_requires_grad);
  Outcome r{fn(x), {}};
  weighted_sum(r.out).backward();
  // Copies: a later backward accumulates into .grad in place.
  r.grads.push_back(x.grad().defined() ? x.grad().clone() : Tensor());
  for (const Tensor& p : m.parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

void expect_identical(const Outcome& got, const Outcome& want) {
  EXPECT_CLOSE(got.out, want.out, exact());
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i));
    ASSERT_EQ(got.grads[i].defined(), want.grads[i].defined());
    if (want.grads[i].defined()) {
      EXPECT_CLOSE(got.grads[i], want.grads[i], exact());
    }
  }
}

nn::Sequential mlp(double p) {
  return nn::Sequential(nn::Linear(8, 16), nn::Tanh(), nn::Dropout(p), nn::Linear(16, 16), nn::GELU(),
                        nn::Dropout(p), nn::Linear(16, 4));
}

// A module that counts its forward calls: y = x * w.
class CountingImpl : public nn::Module {
 public:
  explicit CountingImpl(double w0) : Module("Counting") { w = register_parameter("w", full({1}, w0)); }
  Tensor forward(const Tensor& x) {
    ++calls;
    return x * w;
  }
  Tensor w;
  int calls = 0;
};
EMBER_MODULE(Counting);

TEST(Checkpoint, MlpWithDropoutMatchesPlainBitwise) {
  nn::Sequential m = mlp(0.4);
  Tensor x = randn({6, 8});
  Outcome plain = run_model(
      *m, [&](const Tensor& t) { return m(t); }, x);
  manual_seed(8);
  EXPECT_FALSE(assert_close(m(x), plain.out)) << "dropout should be active";
  Outcome ckpt = run_model(
      *m, [&](const Tensor& t) { return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t); }, x);
  expect_identical(ckpt, plain);
}

// The recomputation runs in the forward's autocast state although backward runs with autocast
// off: otherwise it would save float32 where the forward saved bfloat16 and fail.
TEST(Checkpoint, RecomputesUnderTheForwardsAutocastState) {
  nn::Sequential m = mlp(0.4);
  Tensor x = randn({6, 8});
  auto under_autocast = [](const Fn& fn) {
    return [fn](const Tensor& t) {
      amp::AutocastGuard autocast(kCPU, kBFloat16);
      return fn(t);
    };
  };
  Outcome plain = run_model(*m, under_autocast([&](const Tensor& t) { return m(t); }), x);
  EXPECT_EQ(plain.out.dtype(), kBFloat16);
  Outcome ckpt = run_model(*m, under_autocast([&](const Tensor& t) {
    return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t);
  }),
                           x);
  expect_identical(ckpt, plain);
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
}

TEST(Checkpoint, WithoutPreservingRngTheDropoutMasksDiffer) {
  nn::Sequential m = mlp(0.5);
  Tensor x = randn({6, 8});
  Outcome plain = run_model(
      *m, [&](const Tensor& t) { return m(t); }, x);
  autograd::CheckpointOptions options;
  options.preserve_rng_state = false;
  Outcome ckpt = run_model(
      *m,
      [&](const Tensor& t) {
        return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t, options);
      },
      x);
  EXPECT_CLOSE(ckpt.out, plain.out, exact());
  EXPECT_FALSE(assert_close(ckpt.grads[0], plain.grads[0]));
}

TEST(Checkpoint, LeavesTheGeneratorsWhereThePlainRunLeavesThem) {
  nn::Sequential m = mlp(0.3);
  Tensor x = randn({4, 8});
  run_model(
      *m, [&](const Tensor& t) { return m(t); }, x);
  PhiloxState plain = default_generator(kCPU).get_state();
  run_model(
      *m, [&](const Tensor& t) { return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t); }, x);
  PhiloxState ckpt = default_generator(kCPU).get_state();
  EXPECT_EQ(ckpt.seed, plain.seed);
  EXPECT_EQ(ckpt.offset, plain.offset);
}

TEST(Checkpoint, TransformerEncoderLayerMatchesPlainBitwise) {
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(16, 4)
                                        .dim_feedforward(32)
                                        .dropout(0.2)
                                        .activation("gelu")
                                        .batch_first(true));
  Tensor x = randn({2, 5, 16});
  Tensor mask = nn::generate_square_subsequent_mask(5);
  Fn fwd = [&](const Tensor& t) { return layer(t, mask); };
  Outcome plain = run_model(*layer, fwd, x);
  Outcome ckpt = run_model(
      *layer, [&](const Tensor& t) { return autograd::checkpoint(fwd, t); }, x);
  expect_identical(ckpt, plain);
}

TEST(Checkpoint, InputWithoutRequiresGradStillGivesParameterGradients) {
  nn::Sequential m = mlp(0.3);
  Tensor x = randn({5, 8});
  Outcome plain = run_model(
      *m, [&](const Tensor& t) { return m(t); }, x, /*input_requires_grad=*/false);
  Outcome ckpt = run_model(
      *m, [&](const Tensor& t) { return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t); }, x,
      false);
  EXPECT_FALSE(ckpt.grads[0].defined());
  EXPECT_TRUE(ckpt.grads[1].defined());
  expect_identical(ckpt, plain);
}

TEST(Checkpoint, SeveralInputsAndOutputs) {
  Tensor a = randn({3, 4}, kFloat64).requires_grad_(), b = randn({3, 4}, kFloat64).requires_grad_();
  Tensor c = randn({4}, kFloat64);  // no grad
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * in[1]).exp(), in[0].tanh() * in[2]};
  };
  auto loss = [](const std::vector<Tensor>& out) {
    return weighted_sum(out[0]) + weighted_sum(out[1] * out[1]);
  };
  std::vector<Tensor> want = autograd::grad({loss(fn({a, b, c}))}, {a, b});
  std::vector<Tensor> got = autograd::grad({loss(autograd::checkpoint(fn, {a, b, c}))}, {a, b});
  EXPECT_CLOSE(got[0], want[0], exact());
  EXPECT_CLOSE(got[1], want[1], exact());
}

TEST(Checkpoint, GradcheckAndGradgradcheck) {
  nn::Linear lin(nn::LinearOptions(3, 2));
  lin->to(kFloat64);
  auto fn = [&](const std::vector<Tensor>& in) {
    return autograd::checkpoint(
        [&](const std::vector<Tensor>& u) { return std::vector<Tensor>{lin(u[0]).tanh() * u[1].exp()}; },
        in)[0];
  };
  std::vector<Tensor> inputs{randn({4, 3}, kFloat64).requires_grad_(),
                             randn({4, 2}, kFloat64).requires_grad_(), lin->weight, lin->bias};
  EXPECT_TRUE(autograd::gradcheck(fn, inputs));
  EXPECT_TRUE(autograd::gradgradcheck(fn, inputs));
}

TEST(Checkpoint, CreateGraphGivesPlainSecondDerivatives) {
  Tensor w = randn({3, 3}).requires_grad_();
  Tensor x0 = randn({2, 3});
  Fn fn = [&](const Tensor& x) { return x.matmul(w).tanh().square(); };
  auto second = [&](const Fn& f) {
    Tensor x = x0.clone().requires_grad_();
    w.set_grad(Tensor());
    Tensor g = autograd::grad({weighted_sum(f(x))}, {x}, {}, false, /*create_graph=*/true)[0];
    weighted_sum(g).backward();
    return std::vector<Tensor>{g.detach(), x.grad(), w.grad()};
  };
  std::vector<Tensor> want = second(fn);
  std::vector<Tensor> got = second([&](const Tensor& x) { return autograd::checkpoint(fn, x); });
  for (size_t i = 0; i < want.size(); ++i) EXPECT_CLOSE(got[i], want[i], exact());
}

TEST(Checkpoint, NestedCheckpointsRecomputeAsPyTorchDoes) {
  Counting a(1.5), b(-0.5), c(2.0);
  nn::Dropout drop(0.5);
  Fn inner = [&](const Tensor& t) { return drop(b(t).tanh()); };
  Fn outer = [&](const Tensor& t) { return c(autograd::checkpoint(inner, a(t).exp())); };
  Tensor x0 = randn({4, 5});
  auto grads = [&](const Fn& f) {
    manual_seed(3);
    Tensor x = x0.clone().requires_grad_();
    return autograd::grad({weighted_sum(f(x))}, {x, a->w, b->w, c->w});
  };
  std::vector<Tensor> want = grads([&](const Tensor& t) { return c(drop(b(a(t).exp()).tanh())); });
  for (Counting* m : {&a, &b, &c}) (*m)->calls = 0;
  std::vector<Tensor> got = grads([&](const Tensor& t) { return autograd::checkpoint(outer, t); });
  for (size_t i = 0; i < want.size(); ++i) EXPECT_CLOSE(got[i], want[i], exact());
  // The forward, then the outer recomputation (which reruns the inner region), then the inner one.
  EXPECT_EQ(a->calls, 2);
  EXPECT_EQ(b->calls, 3);
  EXPECT_EQ(c->calls, 2);
}

TEST(Checkpoint, CheckpointSequentialMatchesPlainAndSplitsAsPyTorch) {
  // checkpoint_sequential(seq, segments, x): segments - 1 checkpointed runs of len // segments
  // modules, the rest plain; a checkpointed module runs twice.
  for (auto [segments, twice] :
       std::vector<std::pair<int64_t, int>>{{1, 0}, {2, 3}, {4, 3}, {5, 4}, {11, 5}}) {
    SCOPED_TRACE("segments " + std::to_string(segments));
    nn::Sequential seq;
    std::vector<Counting> counters;
    for (int i = 0; i < 5; ++i) {
      counters.emplace_back(0.5 + 0.25 * i);
      seq->push_back(counters.back());
      if (i == 2) seq->push_back(nn::Dropout(0.5));
      seq->push_back(nn::Tanh());
    }
    Tensor x = randn({3, 4});
    Outcome plain = run_model(
        *seq, [&](const Tensor& t) { return seq(t); }, x);
    for (Counting& c : counters) c->calls = 0;
    Outcome ckpt = run_model(
        *seq, [&](const Tensor& t) { return nn::checkpoint_sequential(seq, segments, t); }, x);
    expect_identical(ckpt, plain);
    // 11 modules: segments of 11 / segments modules; counters sit at positions 0, 2, 4, 7, 9.
    int64_t size = 11 / segments, checkpointed = size * (segments - 1);
    int n_twice = 0;
    const int64_t position[] = {0, 2, 4, 7, 9};
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(counters[i]->calls, position[i] < checkpointed ? 2 : 1) << "counter " << i;
      n_twice += counters[i]->calls == 2;
    }
    EXPECT_EQ(n_twice, twice);
  }
}

// Counts the bytes of live CPU allocations while installed.
class CountingAllocator : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    DataPtr d = base_->allocate(nbytes);
    live_ += static_cast<int64_t>(nbytes);
    auto* block = new Block{d, nbytes, this};
    return {d.ptr, block, &release, d.device};
  }
  int64_t live() const { return live_.load(); }

  // Installed for its scope.
  struct Install {
    explicit Install(CountingAllocator& a) : prev(get_allocator(kCPU)) {
      a.base_ = prev;
      set_allocator(kCPU, &a);
    }
    ~Install() { set_allocator(kCPU, prev); }
    Allocator* prev;
  };

 private:
  struct Block {
    DataPtr base;
    size_t nbytes;
    CountingAllocator* owner;
  };
  static void release(void* ctx) {
    auto* b = static_cast<Block*>(ctx);
    b->owner->live_ -= static_cast<int64_t>(b->nbytes);
    if (b->base.deleter) b->base.deleter(b->base.ctx);
    delete b;
  }
  Allocator* base_ = nullptr;
  std::atomic<int64_t> live_{0};
};

TEST(Checkpoint, KeepsNoActivationsBetweenForwardAndBackward) {
  static CountingAllocator counter;  // outlives every tensor it hands out
  nn::Sequential m;
  for (int i = 0; i < 4; ++i) {
    m->push_back(nn::Linear(64, 64));
    m->push_back(nn::GELU());
  }
  Tensor x = randn({128, 64}).requires_grad_();
  const int64_t activation = 128 * 64 * 4;
  auto live_after_forward = [&](const Fn& f) {
    CountingAllocator::Install install(counter);
    int64_t before = counter.live();
    Tensor out = f(x);
    int64_t held = counter.live() - before;
    weighted_sum(out).backward();
    return held;
  };
  Outcome plain_grads = run_model(
      *m, [&](const Tensor& t) { return m(t); }, x);
  int64_t plain = live_after_forward([&](const Tensor& t) { return m(t); });
  Fn ckpt = [&](const Tensor& t) { return autograd::checkpoint([&](const Tensor& u) { return m(u); }, t); };
  int64_t checkpointed = live_after_forward(ckpt);
  // Plain: 4 linear outputs (saved by GELU) and 4 GELU outputs (saved by the next linear, the last
  // one returned). Checkpointed: the output alone.
  EXPECT_GE(plain, 8 * activation);
  EXPECT_EQ(checkpointed, activation);
  expect_identical(run_model(*m, ckpt, x), plain_grads);
}

TEST(Checkpoint, RetainGraphBackwardTwiceRecomputesOnce) {
  Counting a(1.5);
  Tensor x = randn({3}).requires_grad_();
  Tensor y = autograd::checkpoint([&](const Tensor& t) { return a(t).exp(); }, x);
  weighted_sum(y).backward({}, /*retain_graph=*/true);
  Tensor once = x.grad().clone();
  weighted_sum(y).backward();
  EXPECT_CLOSE(x.grad(), once * 2, exact());
  EXPECT_EQ(a->calls, 2);
  EXPECT_EMBER_ERROR(weighted_sum(y).backward(), "backward through the graph a second time");
}

TEST(Checkpoint, WithoutGradModeItJustRunsTheFunction) {
  Counting a(2.0);
  Tensor x = randn({3}).requires_grad_();
  NoGradGuard no_grad;
  Tensor y = autograd::checkpoint([&](const Tensor& t) { return a(t); }, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_CLOSE(y, x.detach() * 2, exact());
  EXPECT_EQ(a->calls, 1);
}

TEST(Checkpoint, Errors) {
  Tensor x = randn({4}).requires_grad_();
  EXPECT_EMBER_ERROR(autograd::checkpoint(autograd::CheckpointFunction(), {x}), "checkpoint",
                     "function is empty");
  EXPECT_EMBER_ERROR(autograd::checkpoint(Fn(), x), "checkpoint", "function is empty");
  EXPECT_EMBER_ERROR(
      autograd::checkpoint([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }, {x}),
      "checkpoint", "returned no tensors");
  EXPECT_EMBER_ERROR(autograd::checkpoint([](const Tensor&) { return Tensor(); }, x), "checkpoint",
                     "output 0", "undefined");

  // The recomputation must save what the forward saved.
  int calls = 0;
  Tensor more =
      autograd::checkpoint([&](const Tensor& t) { return ++calls == 1 ? t.exp() : t.exp().exp(); }, x);
  EXPECT_EMBER_ERROR(more.sum().backward(), "checkpoint", "saved more tensors", "forward");
  calls = 0;
  Tensor fewer =
      autograd::checkpoint([&](const Tensor& t) { return ++calls == 1 ? t.exp().exp() : t.exp(); }, x);
  EXPECT_EMBER_ERROR(fewer.sum().backward(), "checkpoint", "saved 1 tensors", "forward saved 2");
  calls = 0;
  Tensor other = autograd::checkpoint(
      [&](const Tensor& t) { return ++calls == 1 ? t.exp() : t.narrow(0, 0, 2).exp(); }, x);
  EXPECT_EMBER_ERROR(other.sum().backward(), "checkpoint", "saved tensor 0 was [4] float32",
                     "but [2] float32");

  // An input changed in place after the forward.
  Tensor h = x * 1;
  Tensor y = autograd::checkpoint([](const Tensor& t) { return t.exp(); }, h);
  h.add_(1);
  EXPECT_EMBER_ERROR(y.sum().backward(), "modified by an inplace operation", "saved by checkpoint",
                     "is at version 1");

  // A saved tensor changed in place later in the function (plain autograd refuses it too).
  Fn inplace = [](const Tensor& t) {
    Tensor e = t.exp();  // saves e
    return e.mul_(2);
  };
  EXPECT_EMBER_ERROR(inplace(x).sum().backward(), "modified by an inplace operation");
  EXPECT_EMBER_ERROR(autograd::checkpoint(inplace, x).sum().backward(), "checkpoint",
                     "modified by an inplace operation later in the checkpointed function");

  // A backward inside the function, on tensors it saved.
  EXPECT_EMBER_ERROR(autograd::checkpoint(
                         [](const Tensor& t) {
                           Tensor e = t.exp();
                           return autograd::grad({e.sum()}, {t}, {}, true)[0];
                         },
                         x),
                     "checkpoint", "backward inside the checkpointed function");

  nn::Sequential seq{nn::Tanh(), nn::Tanh()};
  EXPECT_EMBER_ERROR(nn::checkpoint_sequential(seq, 0, x), "checkpoint_sequential",
                     "segments must be between 1 and the number of modules (2), got 0");
  EXPECT_EMBER_ERROR(nn::checkpoint_sequential(seq, 3, x), "checkpoint_sequential", "got 3");
  EXPECT_EMBER_ERROR(nn::checkpoint_sequential(nn::Sequential(nullptr), 1, x), "checkpoint_sequential",
                     "null holder");
  EXPECT_EMBER_ERROR(seq->forward_range(x, 1, 3), "Sequential", "range [1, 3)", "2 modules");
}

TEST(SavedTensorHooks, PackAndUnpackEverySavedTensor) {
  // An "offloading" hook: keeps a copy, hands it back; the innermost guard wins.
  int outer = 0, inner = 0;
  Tensor w = randn({3}).requires_grad_();
  Tensor x = randn({3}).requires_grad_();
  auto copying = [](int& count) {
    return [&count](const Tensor& t) -> UnpackHook {
      ++count;
      Tensor copy = t.detach().clone();
      return [copy] { return copy; };
    };
  };
  Tensor y;
  {
    SavedTensorHooks o(copying(outer));
    Tensor e = x.exp();  // saves its output
    {
      SavedTensorHooks i(copying(inner));
      y = (e * w).sum();  // saves e and w
    }
  }
  EXPECT_EQ(outer, 1);
  EXPECT_EQ(inner, 2);
  // create_graph through the hooked leaf w still reaches w.
  Tensor gx = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true)[0];
  EXPECT_CLOSE(gx, w.detach() * x.detach().exp());
  gx.sum().backward();
  EXPECT_CLOSE(w.grad(), x.detach().exp());
}

TEST(SavedTensorHooks, Errors) {
  EXPECT_EMBER_ERROR(SavedTensorHooks guard{PackHook()}, "SavedTensorHooks", "pack hook is empty");
  Tensor x = randn({3}).requires_grad_();
  {
    SavedTensorHooks hooks([](const Tensor&) { return UnpackHook(); });
    EXPECT_EMBER_ERROR(x.exp(), "SavedTensorHooks", "empty unpack function");
  }
  Tensor y;
  {
    SavedTensorHooks hooks([](const Tensor&) -> UnpackHook { return [] { return Tensor(); }; });
    y = x.exp();
  }
  EXPECT_EMBER_ERROR(y.sum().backward(), "exp", "unpack hook returned an undefined tensor");
}

}  // namespace
}  // namespace ember::testing
