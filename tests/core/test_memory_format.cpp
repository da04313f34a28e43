// Memory formats on the CPU: the geometry tests (is_contiguous(ChannelsLast),
// suggest_memory_format, is_non_overlapping_and_dense) with PyTorch's size-1 rules, the layouts of
// empty / empty_like / clone / to / contiguous, elementwise results laid out as PyTorch's
// TensorIterator lays them out, reductions, views and autograd on NHWC tensors, conv2d with an
// NHWC input, Module::to(MemoryFormat), the elementwise loop walking NHWC memory as one run, and
// the errors. Expected strides come from CPU PyTorch 2.x (the snippet above each check).
#include "ember/core/cpu/elementwise_loop.h"
#include "ember/core/loop_dims.h"
#include "test_util.h"

namespace ember::testing {
namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

// linspace(-1, 1, 120).reshape(2, 3, 4, 5), the values most checks use.
Tensor values() { return linspace(-1, 1, 120).reshape({2, 3, 4, 5}); }

TEST(MemoryFormat, GeometryTestsMatchPyTorch) {
  // t = torch.empty_strided(sizes, strides); t.is_contiguous(),
  // t.is_contiguous(memory_format=torch.channels_last),
  // torch._prims_common.is_non_overlapping_and_dense_or_false(t),
  // torch._prims_common.suggest_memory_format(t) (== the layout F.max_pool2d(t, 1) returns).
  struct Case {
    DimVector sizes, strides;
    bool contiguous, channels_last, dense;
    MemoryFormat suggest;
  };
  const MemoryFormat C = MemoryFormat::Contiguous;
  const Case cases[] = {
      {{2, 3, 4, 5}, {60, 1, 15, 3}, false, true, true, kCL},
      {{2, 3, 4, 5}, {60, 20, 5, 1}, true, false, true, C},
      {{2, 1, 4, 5}, {20, 1, 5, 1}, true, true, true, kCL},
      {{2, 1, 4, 5}, {20, 20, 5, 1}, true, true, true, C},
      {{2, 3, 1, 1}, {3, 1, 3, 3}, true, true, true, kCL},
      {{2, 3, 1, 1}, {3, 1, 1, 1}, true, true, true, C},
      {{4, 1, 1, 1}, {1, 1, 1, 1}, true, true, true, C},
      {{2, 3, 4, 5}, {60, 1, 15, 0}, false, false, false, C},
      {{1, 3, 1, 5}, {15, 1, 15, 3}, false, true, true, kCL},
      {{2, 3, 4, 5}, {1, 2, 6, 24}, false, false, true, C},
      {{2, 3, 4, 5}, {60, 1, 30, 3}, false, false, false, C},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << IntArrayRef(c.sizes) << " " << IntArrayRef(c.strides));
    Tensor t = empty_strided(c.sizes, c.strides);
    EXPECT_EQ(t.is_contiguous(), c.contiguous);
    EXPECT_EQ(t.is_contiguous(MemoryFormat::Contiguous), c.contiguous);
    EXPECT_EQ(t.is_contiguous(kCL), c.channels_last);
    EXPECT_EQ(t.is_non_overlapping_and_dense(), c.dense);
    EXPECT_EQ(t.suggest_memory_format(), c.suggest);
  }
  // Other ranks are never channels-last (no error, as PyTorch).
  EXPECT_FALSE(empty({2, 3, 4}).is_contiguous(kCL));
  EXPECT_EQ(empty({2, 3, 4}).suggest_memory_format(), MemoryFormat::Contiguous);
}

TEST(MemoryFormat, ContiguousAndEmptyInChannelsLast) {
  // torch.empty(sizes).contiguous(memory_format=torch.channels_last).stride()
  const std::pair<DimVector, Strides> contiguous_cases[] = {
      {{2, 3, 4, 5}, {60, 1, 15, 3}},
      {{1, 3, 4, 5}, {60, 1, 15, 3}},
      {{2, 3, 1, 5}, {15, 1, 15, 3}},
      {{0, 3, 4, 5}, {60, 1, 15, 3}},
      // Already channels-last as they are: returned unchanged.
      {{2, 1, 4, 5}, {20, 20, 5, 1}},
      {{2, 3, 1, 1}, {3, 1, 1, 1}},
      {{2, 1, 1, 1}, {1, 1, 1, 1}},
  };
  for (const auto& [sizes, expected] : contiguous_cases) {
    Tensor t = empty(sizes);
    Tensor c = t.contiguous(kCL);
    EXPECT_EQ(strides(c), expected) << IntArrayRef(sizes);
    EXPECT_TRUE(c.is_contiguous(kCL));
    EXPECT_EQ(c.is_same(t), t.is_contiguous(kCL));
  }
  // torch.empty(sizes, memory_format=torch.channels_last).stride()
  const std::pair<DimVector, Strides> empty_cases[] = {{{2, 3, 4, 5}, {60, 1, 15, 3}},
                                                       {{2, 1, 4, 5}, {20, 1, 5, 1}},
                                                       {{2, 3, 1, 5}, {15, 1, 15, 3}},
                                                       {{1, 1, 1, 1}, {1, 1, 1, 1}}};
  for (const auto& [sizes, expected] : empty_cases) {
    EXPECT_EQ(strides(empty(sizes, TensorOptions().memory_format(kCL))), expected) << IntArrayRef(sizes);
    EXPECT_EQ(strides(zeros(sizes, memory_format(kCL))), expected) << IntArrayRef(sizes);
  }
  // Values survive the round trip NCHW -> NHWC -> NCHW.
  Tensor x = values();
  Tensor back = nhwc(x).contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_CLOSE(back, x);
  EXPECT_CLOSE(nhwc(x), x);
}

TEST(MemoryFormat, EmptyLikeCloneAndToPreserveTheLayout) {
  Tensor base = empty({2, 3, 4, 5});
  // torch.empty_like(t).stride() for a permuted, a strided NCHW, a strided NHWC and a strided
  // transposed t: dense layouts are kept, others made dense in the same order of dims.
  EXPECT_EQ(strides(empty_like(base.permute({0, 2, 3, 1}))), (Strides{60, 5, 1, 20}));
  EXPECT_EQ(strides(empty_like(base.slice(2, 0, 4, 2))), (Strides{30, 10, 5, 1}));
  EXPECT_EQ(strides(empty_like(nhwc(base).slice(2, 0, 4, 2))), (Strides{30, 1, 15, 3}));
  EXPECT_EQ(strides(empty_like(base.transpose(0, 1).slice(2, 0, 4, 2))), (Strides{10, 30, 5, 1}));
  // torch.empty_strided((2,3,4,5), (60,1,15,0)): overlapping; empty_like gives (60, 5, 15, 1).
  EXPECT_EQ(strides(empty_like(empty_strided({2, 3, 4, 5}, {60, 1, 15, 0}))), (Strides{60, 5, 15, 1}));
  EXPECT_EQ(strides(empty_like(empty_strided({2, 1, 4, 5}, {20, 1, 5, 1}))), (Strides{20, 1, 5, 1}));
  // An explicit memory format wins: torch.empty_like(t, memory_format=torch.channels_last).
  EXPECT_EQ(strides(empty_like(base, TensorOptions().memory_format(kCL))), (Strides{60, 1, 15, 3}));
  EXPECT_EQ(strides(zeros_like(nhwc(base), kFloat64)), (Strides{60, 1, 15, 3}));

  Tensor x = nhwc(values());
  // x.clone(), x.to(torch.float64): NHWC kept; a transposed [3, 4] clones to (1, 4).
  EXPECT_EQ(strides(x.clone()), (Strides{60, 1, 15, 3}));
  EXPECT_EQ(strides(x.to(kFloat64)), (Strides{60, 1, 15, 3}));
  EXPECT_CLOSE(x.to(kFloat64), values().to(kFloat64));
  Tensor tr = arange(12, kFloat32).reshape({3, 4}).t();
  EXPECT_EQ(strides(tr.clone()), (Strides{1, 4}));
  EXPECT_EQ(strides(tr.clone(MemoryFormat::Contiguous)), (Strides{3, 1}));
  EXPECT_EQ(strides(tr.contiguous()), (Strides{3, 1}));
  EXPECT_CLOSE(tr.clone(), tr);
  // x.to(memory_format=...): a copy unless the layout already suggests that format.
  Tensor plain = values();
  Tensor converted = plain.to(plain.options().memory_format(kCL));
  EXPECT_EQ(strides(converted), (Strides{60, 1, 15, 3}));
  EXPECT_CLOSE(converted, plain);
  EXPECT_TRUE(converted.to(converted.options().memory_format(kCL)).is_same(converted));
  EXPECT_TRUE(plain.to(plain.options().memory_format(MemoryFormat::Contiguous)).is_same(plain));
  EXPECT_EQ(strides(converted.to(TensorOptions(kFloat64).memory_format(MemoryFormat::Contiguous))),
            (Strides{60, 20, 5, 1}));
}

TEST(MemoryFormat, Errors) {
  // PyTorch: "required rank 4 tensor to use channels_last format".
  EXPECT_EMBER_ERROR(empty({2, 3, 4}).contiguous(kCL),
                     "contiguous: required rank 4 tensor to use channels_last", "[2, 3, 4]");
  EXPECT_EMBER_ERROR(empty({2, 3, 4}, memory_format(kCL)), "empty: required rank 4 tensor", "[2, 3, 4]");
  EXPECT_EMBER_ERROR(empty({2, 3, 4, 5, 6}).clone(kCL), "clone: required rank 4 tensor", "[2, 3, 4, 5, 6]");
  EXPECT_EMBER_ERROR(empty({6}).to(TensorOptions().memory_format(kCL)), "to: required rank 4 tensor", "[6]");
  EXPECT_EMBER_ERROR(empty_like(empty({2, 3}), memory_format(kCL)), "required rank 4 tensor", "[2, 3]");
  EXPECT_EMBER_ERROR(empty({2, 3}).is_contiguous(MemoryFormat::Preserve),
                     "is_contiguous: memory format Preserve");
  EXPECT_EMBER_ERROR(empty({2, 3}).contiguous(MemoryFormat::Preserve), "contiguous: memory format Preserve");
  EXPECT_EMBER_ERROR(empty({2, 3}, memory_format(MemoryFormat::Preserve)), "empty: memory format Preserve");
}

TEST(MemoryFormat, ElementwiseResultsFollowTheInputsAsPyTorch) {
  Tensor x = values(), y = values() * 0.5 + 0.25;
  Tensor a = nhwc(x), b = y;  // a NHWC, b NCHW, same values as x and y
  const Strides kNhwc{60, 1, 15, 3}, kNchw{60, 20, 5, 1};
  // (a + a).stride(), (a + b).stride(), ... in PyTorch: the first input whose strides order
  // the dims decides.
  EXPECT_EQ(strides(a + a), kNhwc);
  EXPECT_EQ(strides(a + b), kNhwc);
  EXPECT_EQ(strides(b + a), kNchw);
  Tensor bias = linspace(-1, 1, 3).reshape({3, 1, 1});
  EXPECT_EQ(strides(a + bias), kNhwc);
  EXPECT_EQ(strides(bias + a), kNhwc);
  EXPECT_EQ(strides(a * 2), kNhwc);
  EXPECT_EQ(strides(2 * a), kNhwc);
  EXPECT_EQ(strides(a + full({}, 2.0)), kNhwc);
  EXPECT_EQ(strides(a + ones({1, 3, 1, 1})), kNhwc);
  EXPECT_EQ(strides(a + ones({5})), kNhwc);
  EXPECT_EQ(strides(a + ones({1, 1, 4, 1})), kNhwc);
  EXPECT_EQ(strides(a.relu()), kNhwc);
  EXPECT_EQ(strides(a.exp()), kNhwc);
  EXPECT_EQ(strides(a.clamp(0, 1)), kNhwc);
  EXPECT_EQ(strides(gelu(a)), kNhwc);
  EXPECT_EQ(strides(gelu_backward(a, b)), kNhwc);
  EXPECT_EQ(strides(a > 0), kNhwc);
  EXPECT_EQ(strides(where(a > 0, a, b)), kNhwc);
  EXPECT_EQ(strides(where(b > 0, a, b)), kNchw);  // the condition comes first
  EXPECT_EQ(strides(dropout(a, 0.5, true)), kNhwc);
  // masked_fill is always contiguous in PyTorch (it fills a contiguous clone).
  EXPECT_EQ(strides(a.masked_fill(a > 0, 1.0)), kNchw);
  // Broadcasting a contiguous [2, 3, 1, 1] (also channels-last) with [4, 5]: contiguous.
  EXPECT_EQ(strides(nhwc(ones({2, 3, 1, 1})) + ones({4, 5})), kNchw);
  // Not dense: a strided NHWC view gives a dense NHWC result; with a contiguous input first,
  // a contiguous one. (s = a[:, :, ::2]; s.relu(), s + c, c + s)
  Tensor s = a.slice(2, 0, 4, 2), c = x.slice(2, 0, 4, 2).contiguous();
  EXPECT_EQ(strides(s.relu()), (Strides{30, 1, 15, 3}));
  EXPECT_EQ(strides(s + c), (Strides{30, 1, 15, 3}));
  EXPECT_EQ(strides(c + s), (Strides{30, 10, 5, 1}));
  // Other permutations: t = arange(12.).reshape(3, 4).t(); p = arange(120.).reshape(2, 3, 4, 5)
  // .permute(3, 1, 0, 2).
  Tensor t = arange(12, kFloat32).reshape({3, 4}).t();
  EXPECT_EQ(strides(t + ones({4, 3})), (Strides{1, 4}));
  EXPECT_EQ(strides(ones({4, 3}) + t), (Strides{3, 1}));
  Tensor p = arange(120, kFloat32).reshape({2, 3, 4, 5}).permute({3, 1, 0, 2});
  EXPECT_EQ(strides(p.exp()), (Strides{1, 20, 60, 5}));
  EXPECT_EQ(strides(p + ones({2, 4})), (Strides{1, 20, 60, 5}));

  // The values are those of the contiguous computation.
  EXPECT_CLOSE(a + b, x + y);
  EXPECT_CLOSE(b + a, x + y);
  EXPECT_CLOSE(a + bias, x + bias);
  EXPECT_CLOSE(a * 2, x * 2);
  EXPECT_CLOSE(a.relu(), x.relu());
  EXPECT_CLOSE(gelu(a), gelu(x));
  EXPECT_CLOSE(where(a > 0, a, b), where(x > 0, x, y));
  EXPECT_CLOSE(s.relu(), x.slice(2, 0, 4, 2).relu());
  EXPECT_CLOSE(p.exp(), p.contiguous().exp());
  Tensor in_place = nhwc(x);
  in_place.mul_(b).add_(bias);
  EXPECT_EQ(strides(in_place), kNhwc);
  EXPECT_CLOSE(in_place, x * y + bias);
}

TEST(MemoryFormat, ReductionsAndViewsOfChannelsLast) {
  Tensor x = values(), a = nhwc(x);
  // x = torch.linspace(-1, 1, 120).reshape(2, 3, 4, 5); x.contiguous(memory_format=cl).sum((2, 3))
  EXPECT_CLOSE(a.sum({2, 3}),
               tensor({{-16.80672264099121, -10.084033012390137, -3.3613433837890625},
                       {3.3613436222076416, 10.084033012390137, 16.806724548339844}}),
               Tolerance{1e-5, 1e-5});
  // .mean((0, 2, 3))
  EXPECT_CLOSE(a.mean({0, 2, 3}), tensor({-0.3361344635486603, 0.0, 0.33613449335098267}),
               Tolerance{1e-5, 1e-6});
  EXPECT_CLOSE(a.sum({0, 2, 3}, true), x.sum({0, 2, 3}, true));
  EXPECT_CLOSE(a.amax({1}), x.amax({1}));
  EXPECT_CLOSE(a.sum(), x.sum());
  // view needs row-major memory (PyTorch: "view size is not compatible..."); reshape copies.
  EXPECT_EMBER_ERROR(a.view({2, -1}), "view");
  EXPECT_CLOSE(a.reshape({2, -1}), x.reshape({2, -1}));
  EXPECT_CLOSE(a.flatten(1), x.flatten(1));
  EXPECT_CLOSE(a.permute({0, 2, 3, 1}).view({-1, 3}), x.permute({0, 2, 3, 1}).reshape({-1, 3}));
}

TEST(MemoryFormat, AutogradThroughChannelsLast) {
  // xl = x.contiguous(memory_format=cl).requires_grad_(); w = torch.linspace(0, 1, 120)
  // .reshape(2, 3, 4, 5); ((xl.relu() + xl) * w).sum().backward(): xl.grad is NHWC, and
  // autograd.grad(xl.relu(), xl, w) is NHWC; autograd.grad(xl + xl, xl, w) follows w (NCHW).
  Tensor x = values(), w = linspace(0, 1, 120).reshape({2, 3, 4, 5});
  Tensor xl = nhwc(x).requires_grad_();
  ((xl.relu() + xl) * w).sum().backward();
  EXPECT_EQ(strides(xl.grad()), (Strides{60, 1, 15, 3}));
  EXPECT_CLOSE(xl.grad(), w * ((x > 0) + 1));
  Tensor relu_out = xl.relu();
  relu_out.backward(w);
  EXPECT_CLOSE(xl.grad(), w * ((x > 0) * 2 + 1));
  Tensor g = autograd::grad({xl.relu()}, {xl}, {w})[0];
  EXPECT_EQ(strides(g), (Strides{60, 1, 15, 3}));
  EXPECT_CLOSE(g, w * (x > 0));
  g = autograd::grad({xl + xl}, {xl}, {w})[0];
  EXPECT_EQ(strides(g), (Strides{60, 20, 5, 1}));
  EXPECT_CLOSE(g, w * 2);
  // A gradcheck through NHWC tensors (gradcheck perturbs contiguous inputs, so the function
  // converts): broadcast bias, product, reduction.
  Tensor in = random_tensor({2, 3, 2, 3}, kFloat64).requires_grad_();
  Tensor bias = random_tensor({3, 1, 1}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& t) {
        Tensor v = nhwc(t[0]);
        return ((v + t[1]).relu() * v).sum({0, 2});
      },
      {in, bias}));
}

TEST(MemoryFormat, Conv2dOnTheCpuTakesChannelsLastInput) {
  // x = torch.linspace(-1, 1, 120).reshape(2, 3, 4, 5); w = torch.linspace(-0.5, 0.5, 108)
  // .reshape(4, 3, 3, 3); y = F.conv2d(x, w, padding=1): y.sum() 61.163902282714844,
  // y[1, 2, 3, 4] 1.0248960256576538, y[0, 0, 0, 0] 2.882431745529175.
  Tensor x = values(), w = linspace(-0.5, 0.5, 108).reshape({4, 3, 3, 3});
  Tensor xl = nhwc(x).requires_grad_(), wl = nhwc(w).requires_grad_();
  Tensor y = conv2d(xl, wl, Tensor(), 1, 1);
  EXPECT_NEAR(y.sum().item<double>(), 61.163902282714844, 1e-4);
  EXPECT_NEAR(y.index({1, 2, 3, 4}).item<double>(), 1.0248960256576538, 1e-5);
  EXPECT_NEAR(y.index({0, 0, 0, 0}).item<double>(), 2.882431745529175, 1e-5);
  EXPECT_CLOSE(y, conv2d(x, w, Tensor(), 1, 1));
  y.sum().backward();
  Tensor xr = x.clone().requires_grad_(), wr = w.clone().requires_grad_();
  conv2d(xr, wr, Tensor(), 1, 1).sum().backward();
  EXPECT_CLOSE(xl.grad(), xr.grad());
  EXPECT_CLOSE(wl.grad(), wr.grad());
  EXPECT_TRUE(wl.grad().is_contiguous(kCL));  // the leaf's layout (gradient layout contract)
}

TEST(MemoryFormat, ModuleToChannelsLastKeepsParameterIdentity) {
  // m = nn.Conv2d(3, 4, 3); m.to(memory_format=torch.channels_last): weight strides
  // (27, 1, 9, 3), bias (1,).
  nn::Conv2d conv(nn::Conv2dOptions(3, 4, 3));
  Tensor weight = conv->weight, bias = conv->bias;
  Tensor before = weight.clone(MemoryFormat::Contiguous);
  conv(values()).sum().backward();
  conv->to(kCL);
  EXPECT_TRUE(weight.is_same(conv->weight));
  EXPECT_EQ(strides(conv->weight), (Strides{27, 1, 9, 3}));
  EXPECT_EQ(strides(conv->bias), (Strides{1}));
  EXPECT_TRUE(conv->weight.is_leaf());
  EXPECT_TRUE(conv->weight.requires_grad());
  EXPECT_CLOSE(conv->weight, before);
  EXPECT_TRUE(conv->weight.grad().is_contiguous(kCL));  // gradients are converted too
  // It still trains, and new gradients take the weight's layout.
  conv->zero_grad();
  Tensor out = conv(nhwc(values()));
  EXPECT_CLOSE(out, conv2d(values(), before, conv->bias.detach()));
  out.sum().backward();
  EXPECT_EQ(strides(weight.grad()), (Strides{27, 1, 9, 3}));
  conv->to(MemoryFormat::Contiguous);
  EXPECT_TRUE(weight.is_same(conv->weight));
  EXPECT_EQ(strides(conv->weight), (Strides{27, 9, 3, 1}));
  conv->to(MemoryFormat::Preserve);  // a no-op, as in PyTorch
  EXPECT_EQ(strides(conv->weight), (Strides{27, 9, 3, 1}));
}

TEST(MemoryFormat, FusedOptimizersTakeChannelsLastParams) {
  // Params, gradients and state all NHWC (what Module::to(ChannelsLast), the gradient layout
  // contract and zeros_like give): the flat kernels update them as the contiguous ones.
  Tensor p = values(), g = values().cos();
  std::vector<Tensor> pl = {nhwc(p)}, gl = {nhwc(g)}, ml = {zeros_like(pl[0])}, vl = {zeros_like(pl[0])};
  std::vector<Tensor> pc = {p.clone()}, gc = {g}, mc = {zeros_like(p)}, vc = {zeros_like(p)};
  EXPECT_TRUE(ml[0].is_contiguous(kCL));
  FusedAdamArgs adam{.lr = 0.1, .weight_decay = 0.01};
  fused_adam_(pl, gl, ml, vl, {}, {zeros({1})}, adam);
  fused_adam_(pc, gc, mc, vc, {}, {zeros({1})}, adam);
  EXPECT_TRUE(pl[0].is_contiguous(kCL));
  EXPECT_CLOSE(pl[0], pc[0]);
  EXPECT_CLOSE(vl[0], vc[0]);
  std::vector<Tensor> bl = {zeros_like(pl[0])}, bc = {zeros_like(p)};
  FusedSgdArgs sgd{.lr = 0.1, .momentum = 0.9};
  fused_sgd_(pl, gl, bl, sgd);
  fused_sgd_(pc, gc, bc, sgd);
  EXPECT_CLOSE(pl[0], pc[0]);
  // A gradient in another layout than its param cannot be walked alongside it.
  EXPECT_EMBER_ERROR(fused_sgd_(pl, {g}, bl, sgd),
                     "fused_sgd_: grads[0] (shape [2, 3, 4, 5], strides [60, 20, 5, 1])",
                     "must be contiguous, or dense with the strides of params[0] [60, 1, 15, 3]");
}

TEST(MemoryFormat, ElementwiseLoopWalksNhwcMemoryAsOneRun) {
  // NHWC output and inputs: one run over all 120 elements at unit strides, so the CPU kernels
  // take their direct (vectorizable) loop; a bias [C, 1, 1] input keeps C innermost.
  Tensor out = empty({2, 3, 4, 5}, memory_format(kCL)), a = nhwc(values());
  std::vector<int64_t> runs;
  cpu::ElementwiseIter({out, a, a}).for_each_serial([&](char**, const int64_t* st, int64_t n) {
    EXPECT_EQ(st[0], 4);
    EXPECT_EQ(st[1], 4);
    runs.push_back(n);
  });
  EXPECT_EQ(runs, (std::vector<int64_t>{120}));
  runs.clear();
  cpu::ElementwiseIter({out, a, ones({3, 1, 1})}).for_each_serial([&](char**, const int64_t* st, int64_t n) {
    EXPECT_EQ(st[0], 4);
    EXPECT_EQ(st[2], 4);
    runs.push_back(n);
  });
  EXPECT_EQ(runs, std::vector<int64_t>(40, 3));
  // coalesce_dims (shared with the CUDA plan): NCHW-indexed dims [2, 3, 4, 5] of NHWC operands
  // (byte strides of float32) merge into one; a contiguous output with an NHWC input keeps the
  // output's order, and only H and W, adjacent in both, merge.
  LoopDims nhwc_dims{{2, {240, 240, 0, 0}}, {3, {4, 4, 0, 0}}, {4, {60, 60, 0, 0}}, {5, {12, 12, 0, 0}}};
  coalesce_dims(nhwc_dims, 2);
  ASSERT_EQ(nhwc_dims.size(), 1u);
  EXPECT_EQ(nhwc_dims[0].size, 120);
  EXPECT_EQ(nhwc_dims[0].strides[0], 4);
  LoopDims mixed{{2, {240, 240, 0, 0}}, {3, {80, 4, 0, 0}}, {4, {20, 60, 0, 0}}, {5, {4, 12, 0, 0}}};
  coalesce_dims(mixed, 2);
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_EQ(mixed[1].size, 3);
  EXPECT_EQ(mixed[2].size, 20);
  EXPECT_EQ(mixed[2].strides[0], 4);
  EXPECT_EQ(mixed[2].strides[1], 12);
}

}  // namespace
}  // namespace ember::testing
