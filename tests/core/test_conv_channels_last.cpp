// conv2d, conv_transpose2d and their backward on the CPU with channels-last (NHWC) inputs or
// weights: the NHWC kernels give the values of the NCHW ones (themselves checked against PyTorch
// in test_conv_pool.cpp and op_table_conv.cpp), return NHWC outputs and input gradients, as
// PyTorch's CPU convolution does, over groups 1, 2 and depthwise (conv_depthwise.h's kernels,
// with a channel multiplier of 1 and 2), stride, padding, dilation, 1x1 kernels and float64 /
// float32 / bfloat16; plus float64 gradchecks through NHWC tensors.
#include "test_util.h"

namespace ember::testing {
namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

struct Case {
  const char* desc;
  std::vector<int64_t> x, w;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups;
};

// Direct convolutions: weight [C_out, C_in / g, kH, kW].
const Case kDirect[] = {
    {"groups 1, stride/padding/dilation", {2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1, 2}, {0}, 1},
    {"groups 2", {2, 4, 6, 7}, {6, 2, 3, 3}, {1}, {1}, {2}, {0}, 2},
    {"depthwise", {2, 4, 5, 6}, {4, 1, 3, 3}, {2}, {1}, {1}, {0}, 4},
    {"depthwise multiplier 2", {2, 3, 5, 5}, {6, 1, 2, 2}, {1}, {0, 1}, {2}, {0}, 3},
    {"1x1", {2, 5, 4, 3}, {3, 5, 1, 1}, {1}, {0}, {1}, {0}, 1},
    {"1x1 groups 2", {2, 6, 4, 5}, {4, 3, 1, 1}, {1}, {0}, {1}, {0}, 2},
    {"1x1 stride 2", {2, 4, 5, 5}, {3, 4, 1, 1}, {2}, {0}, {1}, {0}, 1},
};

// Transposed ones: weight [C_in, C_out / g, kH, kW].
const Case kTransposed[] = {
    {"groups 1, stride 2, output_padding", {2, 4, 4, 5}, {4, 3, 3, 3}, {2}, {1}, {1}, {1}, 1},
    {"groups 2, dilation", {2, 4, 3, 4}, {4, 2, 2, 3}, {1, 2}, {0}, {2}, {0, 1}, 2},
    {"depthwise", {2, 3, 4, 4}, {3, 1, 3, 3}, {2}, {1}, {1}, {0}, 3},
    {"depthwise multiplier 2, output_padding", {2, 6, 3, 4}, {6, 1, 2, 3}, {2, 1}, {1, 0}, {1, 2}, {1, 0}, 3},
};

Tensor run(const Case& c, bool transposed, const Tensor& x, const Tensor& w, const Tensor& b) {
  return transposed ? conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation)
                    : conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
}

// Channels-last memory that differs from NCHW memory (more than one channel and pixel).
void expect_nhwc(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous(kCL)) << t.strides();
  EXPECT_FALSE(t.is_contiguous()) << t.strides();
}

// For each of (x NHWC), (w NHWC), (both): the output, and the gradients of x, w and the bias,
// against the all-NCHW run; the output and x's gradient are NHWC, and w's gradient as a leaf
// takes w's layout.
void check(const Case& c, bool transposed, ScalarType dt, Tolerance tol) {
  manual_seed(7);
  Tensor x = random_tensor(c.x, dt, -1, 1), w = random_tensor(c.w, dt, -1, 1);
  Tensor b = random_tensor({transposed ? c.w[1] * c.groups : c.w[0]}, dt, -1, 1);
  Tensor y = run(c, transposed, x.requires_grad_(), w.requires_grad_(), b.requires_grad_());
  Tensor g = random_tensor(y.sizes(), dt, -1, 1);
  std::vector<Tensor> ref = autograd::grad({y}, {x, w, b}, {g});
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode == 0 ? "x channels-last" : mode == 1 ? "w channels-last" : "both channels-last");
    Tensor xl = (mode != 1 ? x.detach().contiguous(kCL) : x.detach().clone()).requires_grad_();
    Tensor wl = (mode != 0 ? w.detach().contiguous(kCL) : w.detach().clone()).requires_grad_();
    Tensor bl = b.detach().clone().requires_grad_();
    // A depthwise weight [C, 1, kH, kW] reads the same either way; PyTorch's rule then keeps NCHW.
    const bool nhwc = mode != 1 || wl.suggest_memory_format() == kCL;
    Tensor yl = run(c, transposed, xl, wl, bl);
    EXPECT_CLOSE(yl, y, tol);
    std::vector<Tensor> got = autograd::grad({yl}, {xl, wl, bl}, {g.contiguous(kCL)}, true);
    if (nhwc) {
      expect_nhwc(yl);
      expect_nhwc(got[0]);
    }
    EXPECT_CLOSE(got[0], ref[0], tol);
    EXPECT_CLOSE(got[1], ref[1], tol);
    EXPECT_CLOSE(got[2], ref[2], tol);
    yl.backward(g);
    EXPECT_CLOSE(wl.grad(), ref[1], tol);
    // The weight's layout (strides of size-1 dims aside: a depthwise weight's gradient is taken
    // as the kernel made it).
    EXPECT_TRUE(same_dense_layout(wl.grad(), wl)) << wl.grad().strides() << " vs " << wl.strides();
  }
}

void check_all(bool transposed) {
  const auto& cases = transposed ? std::vector<Case>(std::begin(kTransposed), std::end(kTransposed))
                                 : std::vector<Case>(std::begin(kDirect), std::end(kDirect));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.desc);
    check(c, transposed, kFloat64, {1e-12, 1e-12});
    check(c, transposed, kFloat32, {1e-5, 1e-5});
    // Both layouts sum in float32 and round once: at most an ulp or so of bfloat16 apart.
    check(c, transposed, kBFloat16, {2e-2, 2e-2});
  }
}

TEST(ConvChannelsLast, BatchOfOneKeepsPyTorchsStrides) {
  // PyTorch: conv2d(x[1, 3, 5, 5] channels-last, w[4, 3, 3, 3], padding=1) has strides
  // (100, 1, 20, 4), channels-last; so has conv_transpose2d's [1, 4, 5, 5], and x's gradient.
  Tensor x = random_tensor({1, 3, 5, 5}, kFloat32).contiguous(kCL).requires_grad_();
  Tensor w = random_tensor({4, 3, 3, 3}, kFloat32), wt = random_tensor({3, 4, 3, 3}, kFloat32);
  Tensor y = conv2d(x, w, {}, 1, 1);
  EXPECT_EQ(y.strides().vec(), (std::vector<int64_t>{100, 1, 20, 4}));
  EXPECT_EQ(y.suggest_memory_format(), kCL);
  Tensor yt = conv_transpose2d(x, wt, {}, 1, 1);
  EXPECT_EQ(yt.strides().vec(), (std::vector<int64_t>{100, 1, 20, 4}));
  Tensor gx = autograd::grad({y}, {x}, {ones_like(y)})[0];
  EXPECT_EQ(gx.strides().vec(), (std::vector<int64_t>{75, 1, 15, 3}));
}

TEST(ConvChannelsLast, Conv2dMatchesNchw) { check_all(false); }

TEST(ConvChannelsLast, ConvTranspose2dMatchesNchw) { check_all(true); }

// Second derivatives: the backward of the NHWC backward (conv_weight_grad's own backward).
TEST(ConvChannelsLast, DoubleBackwardMatchesNchw) {
  manual_seed(8);
  Tensor x = random_tensor({2, 4, 5, 6}, kFloat64), w = random_tensor({6, 2, 3, 3}, kFloat64);
  auto grad_norm = [](const Tensor& xi, const Tensor& wi) {
    Tensor xr = xi.requires_grad_(), wr = wi.requires_grad_();
    Tensor y = conv2d(xr, wr, {}, 2, 1, 1, 2);
    std::vector<Tensor> g = autograd::grad({y.square().sum()}, {xr, wr}, {}, true, true);
    return autograd::grad({g[0].square().sum() + g[1].square().sum()}, {xr, wr});
  };
  std::vector<Tensor> ref = grad_norm(x.clone(), w.clone()),
                      got = grad_norm(x.contiguous(kCL), w.contiguous(kCL));
  EXPECT_CLOSE(got[0], ref[0], Tolerance{1e-12, 1e-12});
  EXPECT_CLOSE(got[1], ref[1], Tolerance{1e-12, 1e-12});
  expect_nhwc(got[0]);
}

TEST(ConvChannelsLast, GradcheckThroughChannelsLast) {
  // gradcheck perturbs contiguous inputs, so the functions make them channels-last.
  manual_seed(9);
  Tensor x = random_tensor({2, 4, 5, 4}, kFloat64).requires_grad_();
  Tensor w = random_tensor({4, 2, 3, 2}, kFloat64).requires_grad_();
  Tensor wd = random_tensor({4, 1, 2, 3}, kFloat64).requires_grad_();
  Tensor b = random_tensor({4}, kFloat64).requires_grad_();
  auto conv = [](const std::vector<Tensor>& t) {
    Tensor y = conv2d(t[0].contiguous(kCL), t[1].contiguous(kCL), t[2], {2, 1}, 1, {1, 2}, 2);
    EXPECT_TRUE(y.is_contiguous(kCL));
    return y;
  };
  EXPECT_TRUE(autograd::gradcheck(conv, {x, w, b}));
  EXPECT_TRUE(autograd::gradgradcheck(conv, {x, w, b}));
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& t) {
        return conv2d(t[0].contiguous(kCL), t[1], t[2], 1, {0, 1}, 1, 4);
      },
      {x, wd, b}));
  Tensor wt = random_tensor({4, 3, 3, 3}, kFloat64).requires_grad_();
  Tensor bt = random_tensor({3}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& t) {
        return conv_transpose2d(t[0].contiguous(kCL), t[1], t[2], 2, 1, {1, 0}, 1, 1);
      },
      {x, wt, bt}));
}

// A transposed convolution to one output channel (groups 1) reads NHWC memory through the
// depthwise kernels with all input channels in one group, and so does its weight gradient: the
// values of the NCHW run.
TEST(ConvChannelsLast, OneOutputChannelMatchesNchw) {
  manual_seed(10);
  for (ScalarType dt : {kFloat64, kFloat32}) {
    SCOPED_TRACE(to_string(dt));
    const Tolerance tol = dt == kFloat64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-5};
    Tensor x = random_tensor({2, 4, 5, 4}, dt, -1, 1), w = random_tensor({4, 1, 3, 2}, dt, -1, 1);
    Tensor b = random_tensor({1}, dt, -1, 1);
    auto run_t = [](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
      return conv_transpose2d(xi, wi, bi, 2, 1, {1, 0}, 1, {1, 2});
    };
    Tensor y = run_t(x.requires_grad_(), w.requires_grad_(), b.requires_grad_());
    Tensor g = random_tensor(y.sizes(), dt, -1, 1);
    std::vector<Tensor> ref = autograd::grad({y}, {x, w, b}, {g});
    Tensor xl = x.detach().contiguous(kCL).requires_grad_(), wl = w.detach().clone().requires_grad_();
    Tensor bl = b.detach().clone().requires_grad_();
    Tensor yl = run_t(xl, wl, bl);
    EXPECT_CLOSE(yl, y, tol);
    std::vector<Tensor> got = autograd::grad({yl}, {xl, wl, bl}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_CLOSE(got[i], ref[i], tol);
  }
}

}  // namespace
}  // namespace ember::testing
