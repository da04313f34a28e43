// Channels-last pooling on the CPU, as PyTorch: a 4D input that suggests channels-last is pooled
// as NHWC, with the values of the NCHW path (exactly: each channel sums its window in the same
// order) and channels-last outputs, indices and gradients; other layouts take the contiguous path.
// Expected strides come from CPU PyTorch 2.x (the snippet above each check).
#include "pool_cases.h"

namespace ember::testing {
namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

TEST(PoolChannelsLast, LayoutsMatchPyTorch) {
  // x = torch.linspace(-1, 1, 420).reshape(2, 5, 6, 7).contiguous(memory_format=torch.channels_last)
  // v, i = F.max_pool2d(x, 3, 2, 1, return_indices=True): v.stride() == i.stride() == (60, 1, 20, 5);
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True).stride() (80, 1, 20, 5);
  // F.adaptive_avg_pool2d(x, (4, 3)).stride() (60, 1, 15, 5); F.adaptive_avg_pool2d(x, 1) (5, 1, 5, 5).
  Tensor x = linspace(-1, 1, 420).reshape({2, 5, 6, 7}), xl = nhwc(x);
  auto [v, i] = max_pool2d_with_indices(xl, 3, 2, 1);
  auto [vc, ic] = max_pool2d_with_indices(x, 3, 2, 1);
  EXPECT_EQ(strides(v), (Strides{60, 1, 20, 5}));
  EXPECT_EQ(strides(i), (Strides{60, 1, 20, 5}));
  EXPECT_EQ(strides(max_pool2d(xl, 3, 2, 1)), (Strides{60, 1, 20, 5}));
  EXPECT_CLOSE(v, vc, Tolerance{0, 0});
  EXPECT_CLOSE(i, ic);  // still h * W + w within the plane
  EXPECT_EQ(strides(avg_pool2d(xl, 3, 2, 1, true)), (Strides{80, 1, 20, 5}));
  EXPECT_EQ(strides(adaptive_avg_pool2d(xl, {4, 3})), (Strides{60, 1, 15, 5}));
  EXPECT_EQ(strides(adaptive_avg_pool2d(xl, 1)), (Strides{5, 1, 5, 5}));
  // The contiguous input keeps giving contiguous results.
  EXPECT_TRUE(vc.is_contiguous() && ic.is_contiguous());
  EXPECT_TRUE(avg_pool2d(x, 3, 2, 1, true).is_contiguous());
  EXPECT_TRUE(adaptive_avg_pool2d(x, {4, 3}).is_contiguous());
}

TEST(PoolChannelsLast, SameValuesAsContiguous) {
  // 3 channels (one partial block of the CPU kernel), 16 (one full block), 37 (two and a part).
  for_each_pool_input({{2, 3, 9, 8}, {1, 16, 7, 7}, {2, 37, 7, 6}}, [](const PoolCase& c, const Tensor& x) {
    Tensor ref = c.fn(x), got = c.fn(nhwc(x));
    EXPECT_TRUE(is_nhwc(got));
    EXPECT_CLOSE(got, ref, Tolerance{0, 0});
  });
}

TEST(PoolChannelsLast, OtherLayoutsTakeTheContiguousPath) {
  Tensor x = linspace(-1, 1, 420).reshape({2, 5, 6, 7});
  // t = x.transpose(2, 3): F.max_pool2d(t, 2).stride() == F.avg_pool2d(t, 2).stride() ==
  // (45, 9, 3, 1); F.adaptive_avg_pool2d(t, 2).stride() (20, 4, 2, 1).
  Tensor t = x.transpose(2, 3);
  const std::pair<Tensor, Tensor> transposed[] = {
      {max_pool2d(t, 2), max_pool2d(t.contiguous(), 2)},
      {avg_pool2d(t, 2), avg_pool2d(t.contiguous(), 2)},
      {adaptive_avg_pool2d(t, 2), adaptive_avg_pool2d(t.contiguous(), 2)},
  };
  EXPECT_EQ(strides(transposed[0].first), (Strides{45, 9, 3, 1}));
  EXPECT_EQ(strides(transposed[1].first), (Strides{45, 9, 3, 1}));
  EXPECT_EQ(strides(transposed[2].first), (Strides{20, 4, 2, 1}));
  for (const auto& [got, ref] : transposed) EXPECT_CLOSE(got, ref, Tolerance{0, 0});
  // s = x.contiguous(memory_format=torch.channels_last)[..., 1:5] is not dense but suggests
  // channels-last: F.max_pool2d(s, 2).stride() (30, 1, 10, 5).
  Tensor s = nhwc(x).narrow(3, 1, 4);
  ASSERT_FALSE(s.is_contiguous(kCL));
  Tensor ms = max_pool2d(s, 2);
  EXPECT_EQ(strides(ms), (Strides{30, 1, 10, 5}));
  EXPECT_CLOSE(ms, max_pool2d(s.contiguous(), 2), Tolerance{0, 0});
  // An unbatched input is never channels-last: h = torch.randn(4, 5, 3).permute(2, 0, 1)
  // (strides (1, 15, 3)); F.max_pool2d(h, 2).stride() (4, 2, 1).
  Tensor h = random_tensor({4, 5, 3}, kFloat32).permute({2, 0, 1});
  Tensor mh = max_pool2d(h, 2);
  EXPECT_EQ(strides(mh), (Strides{4, 2, 1}));
  EXPECT_CLOSE(mh, max_pool2d(h.contiguous(), 2), Tolerance{0, 0});
}

TEST(PoolChannelsLast, OnePixelChannelsLastInputPadsIntoNhwcOutput) {
  // An input both contiguous and channels-last (H = W = 1) whose strides suggest channels-last,
  // padded into a 2 x 2 output that is NHWC only: the kernels must take the layout from the
  // call, not guess it from the input.
  // o = torch.empty_strided((2, 3, 1, 1), (3, 1, 3, 3)); o.copy_(torch.arange(6.).reshape(2, 3, 1, 1))
  // F.max_pool2d(o, 2, 1, 1).stride() (12, 1, 6, 3), values o broadcast over the 2 x 2;
  // F.avg_pool2d(o, 2, 1, 1): o / 4; F.adaptive_avg_pool2d(o, (2, 3)).stride() (18, 1, 9, 3).
  Tensor o = empty_strided({2, 3, 1, 1}, {3, 1, 3, 3});
  o.copy_(arange(6.).to(kFloat32).view({2, 3, 1, 1}));
  ASSERT_EQ(o.suggest_memory_format(), kCL);
  Tensor m = max_pool2d(o, 2, 1, 1), a = avg_pool2d(o, 2, 1, 1), d = adaptive_avg_pool2d(o, {2, 3});
  EXPECT_EQ(strides(m), (Strides{12, 1, 6, 3}));
  EXPECT_EQ(strides(a), (Strides{12, 1, 6, 3}));
  EXPECT_EQ(strides(d), (Strides{18, 1, 9, 3}));
  Tensor ref = arange(6.).to(kFloat32).view({2, 3, 1, 1});
  EXPECT_CLOSE(m, ref.expand({2, 3, 2, 2}), Tolerance{0, 0});
  EXPECT_CLOSE(a, ref.expand({2, 3, 2, 2}) / 4, Tolerance{0, 0});
  EXPECT_CLOSE(d, ref.expand({2, 3, 2, 3}), Tolerance{0, 0});
}

// The three ops, differentiable.
const std::pair<const char*, Pool> kDifferentiable[] = {
    {"max_pool2d", [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); }},
    {"max_pool2d dilated ceil",
     [](const Tensor& x) {
       return max_pool2d(x, {2, 3}, {2, 1}, {1, 0}, 2, true);
     }},
    {"avg_pool2d", [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, true, false); }},
    {"avg_pool2d divisor", [](const Tensor& x) { return avg_pool2d(x, 2, 1, 0, false, true, 3); }},
    {"adaptive_avg_pool2d",
     [](const Tensor& x) {
       return adaptive_avg_pool2d(x, {3, 4});
     }},
    {"adaptive_avg_pool2d global", [](const Tensor& x) { return adaptive_avg_pool2d(x, 1); }},
};

TEST(PoolChannelsLast, GradcheckOnChannelsLastInput) {
  // gradcheck perturbs a contiguous input: the function converts it, so the op sees NHWC.
  for (const auto& [name, fn] : kDifferentiable) {
    SCOPED_TRACE(name);
    Tensor x = random_tensor({1, 2, 4, 5}, kFloat64).requires_grad_();  // small: gradgradcheck is O(n^2)
    autograd::TensorFn f = [fn = fn](const std::vector<Tensor>& t) {
      Tensor y = fn(nhwc(t[0]));
      EXPECT_TRUE(is_nhwc(y));
      return y;
    };
    EXPECT_TRUE(autograd::gradcheck(f, {x}));
    EXPECT_TRUE(autograd::gradgradcheck(f, {x}));
  }
}

TEST(PoolChannelsLast, MaxPoolBackwardKernelIsTheScatterFormula) {
  for (const auto& [name, fn] : kOverlappingMaxPools)
    for (ScalarType dt : {kFloat64, kFloat32, kBFloat16})
      for (bool cl : {false, true}) {
        SCOPED_TRACE(::testing::Message() << name << " " << dt << " channels-last " << cl);
        Tensor x = tied_input({2, 5, 9, 8}, dt);
        if (cl) x = nhwc(x);
        Tensor gy = random_tensor(fn(x).sizes(), dt);
        auto [kernel, formula] = max_pool_grads_both_ways(fn, x, gy);
        EXPECT_EQ(kernel.is_contiguous(), !cl);
        EXPECT_CLOSE(kernel, formula);
      }
}

TEST(PoolChannelsLast, GradInputIsChannelsLast) {
  // xl = x.contiguous(memory_format=torch.channels_last).requires_grad_(); for each pool,
  // torch.autograd.grad(pool(xl), xl, gy) has strides (90, 1, 18, 3) for an NHWC or an NCHW gy.
  for (const auto& [name, fn] : kDifferentiable) {
    SCOPED_TRACE(name);
    Tensor x = random_tensor({2, 3, 5, 6}, kFloat64);
    Tensor xl = nhwc(x).requires_grad_(), xc = x.clone().requires_grad_();
    Tensor yl = fn(xl), yc = fn(xc);
    Tensor gy = random_tensor(yc.sizes(), kFloat64);
    Tensor ref = autograd::grad({yc}, {xc}, {gy}, true)[0];
    EXPECT_TRUE(ref.is_contiguous());
    for (const Tensor& g : {gy, nhwc(gy)}) {
      Tensor gx = autograd::grad({yl}, {xl}, {g}, true)[0];
      EXPECT_EQ(strides(gx), (Strides{90, 1, 18, 3}));
      EXPECT_CLOSE(gx, ref);
    }
  }
}

}  // namespace
}  // namespace ember::testing
