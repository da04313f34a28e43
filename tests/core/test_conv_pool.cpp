// Convolutions and pooling: conv2d against a direct double loop written here, conv_transpose2d
// through its adjoint identity, pooling on small hand-computed inputs, and every error the
// frontends throw.
#include <cmath>
#include <limits>

#include "ember/core/ops/convolution.h"
#include "ember/core/ops/linalg.h"
#include "ember/core/ops/pooling.h"
#include "test_util.h"

namespace ember::testing {
namespace {

struct Conv2dSpec {
  int64_t stride[2] = {1, 1}, pad_begin[2] = {0, 0}, pad_end[2] = {0, 0}, dilation[2] = {1, 1};
  int64_t groups = 1;
};

// conv2d by its definition, in double: out[n, co, i, j] = bias[co] + sum over ci, kh, kw of
// x[n, g * cig + ci, i * s - p + kh * d, j * s - p + kw * d] * w[co, ci, kh, kw].
Tensor naive_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Conv2dSpec& c) {
  Tensor x = input.to(kFloat64).contiguous(), w = weight.to(kFloat64).contiguous();
  const int64_t n = x.size(0), cin = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t cout = w.size(0), cig = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t cog = cout / c.groups;
  const int64_t ho =
      (h + c.pad_begin[0] + c.pad_end[0] - c.dilation[0] * (kh - 1) - 1) / c.stride[0] + 1;
  const int64_t wo =
      (wd + c.pad_begin[1] + c.pad_end[1] - c.dilation[1] * (kw - 1) - 1) / c.stride[1] + 1;
  Tensor out = zeros({n, cout, ho, wo}, kFloat64);
  const double *px = x.data_ptr<double>(), *pw = w.data_ptr<double>();
  double* po = out.data_ptr<double>();
  Tensor b = bias.defined() ? bias.to(kFloat64).contiguous() : zeros({cout}, kFloat64);
  const double* pb = b.data_ptr<double>();
  for (int64_t in = 0; in < n; ++in)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double sum = pb[co];
          for (int64_t ci = 0; ci < cig; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t bb = 0; bb < kw; ++bb) {
                int64_t r = i * c.stride[0] - c.pad_begin[0] + a * c.dilation[0];
                int64_t q = j * c.stride[1] - c.pad_begin[1] + bb * c.dilation[1];
                if (r < 0 || r >= h || q < 0 || q >= wd) continue;
                int64_t chan = (co / cog) * cig + ci;
                sum += px[((in * cin + chan) * h + r) * wd + q] *
                       pw[((co * cig + ci) * kh + a) * kw + bb];
              }
          po[((in * cout + co) * ho + i) * wo + j] = sum;
        }
  return out;
}

TEST(Conv, Conv2dByHand) {
  // out[i, j] = x[i, j] - x[i + 1, j + 1] = -5 for x = arange(16) as 4x4, plus the bias 1.
  Tensor x = arange(16.).view({1, 1, 4, 4}), w = tensor({{{{1., 0.}, {0., -1.}}}});
  EXPECT_CLOSE(conv2d(x, w, tensor({1.})), full({1, 1, 3, 3}, -4.));
  // Padding 1 with a 1x1 kernel of weight 2: a zero border around 2x.
  Tensor y = conv2d(tensor({{{1., 2.}, {3., 4.}}}), full({1, 1, 1, 1}, 2.), {}, 1, 1);
  EXPECT_CLOSE(y,
               tensor({{{0., 0., 0., 0.}, {0., 2., 4., 0.}, {0., 6., 8., 0.}, {0., 0., 0., 0.}}}));
}

TEST(Conv, Conv2dMatchesDirectLoop) {
  struct Case {
    DimVector x, w;
    bool bias;
    Conv2dSpec spec;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, true, {}},
      {{2, 3, 9, 8}, {5, 3, 3, 2}, true, {{2, 1}, {1, 0}, {1, 0}, {1, 1}, 1}},
      {{1, 4, 9, 9}, {6, 2, 3, 3}, false, {{1, 2}, {2, 1}, {2, 1}, {2, 1}, 2}},
      {{3, 6, 5, 7}, {6, 1, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 6}},
      {{2, 8, 6, 6}, {16, 8, 1, 1}, true, {}},
      {{4, 16, 12, 12}, {8, 16, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "x " << IntArrayRef(c.x) << " w " << IntArrayRef(c.w));
    Tensor x = randn(c.x, kFloat64), w = randn(c.w, kFloat64);
    Tensor b = c.bias ? randn({c.w[0]}, kFloat64) : Tensor();
    const Conv2dSpec& s = c.spec;
    Tensor ref = naive_conv2d(x, w, b, s);
    Tensor out = conv2d(x, w, b, {s.stride[0], s.stride[1]}, {s.pad_begin[0], s.pad_begin[1]},
                        {s.dilation[0], s.dilation[1]}, s.groups);
    EXPECT_CLOSE(out, ref);
    Tensor out32 = conv2d(x.to(kFloat32), w.to(kFloat32), c.bias ? b.to(kFloat32) : b,
                          {s.stride[0], s.stride[1]}, {s.pad_begin[0], s.pad_begin[1]},
                          {s.dilation[0], s.dilation[1]}, s.groups);
    EXPECT_CLOSE(out32, ref.to(kFloat32), Tolerance{1e-5, 1e-4});
  }
}

TEST(Conv, PaddingStrings) {
  // "same" pads dilation * (k - 1) in total, the odd one at the end (as PyTorch).
  Tensor x = randn({2, 3, 7, 8}, kFloat64), w = randn({4, 3, 2, 4}, kFloat64);
  Conv2dSpec same{{1, 1}, {1, 1}, {1, 2}, {2, 1}, 1};
  Tensor out = conv2d(x, w, {}, 1, "same", {2, 1});
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 4, 7, 8}));
  EXPECT_CLOSE(out, naive_conv2d(x, w, {}, same));
  EXPECT_CLOSE(conv2d(x, w, {}, 1, PaddingMode(std::string_view("valid"))), conv2d(x, w));
  // conv1d is a conv2d of height 1.
  Tensor x1 = randn({2, 3, 10}, kFloat64), w1 = randn({4, 3, 4}, kFloat64);
  Conv2dSpec same1{{1, 1}, {0, 1}, {0, 2}, {1, 1}, 1};
  EXPECT_CLOSE(conv1d(x1, w1, {}, 1, "same"),
               naive_conv2d(x1.unsqueeze(2), w1.unsqueeze(2), {}, same1).squeeze(2));
}

TEST(Conv, Conv1dMatchesDirectLoop) {
  Tensor x = randn({2, 4, 11}, kFloat64), w = randn({6, 2, 3}, kFloat64), b = randn({6}, kFloat64);
  Conv2dSpec s{{1, 2}, {0, 1}, {0, 1}, {1, 2}, 2};
  Tensor ref = naive_conv2d(x.unsqueeze(2), w.unsqueeze(2), b, s).squeeze(2);
  EXPECT_CLOSE(conv1d(x, w, b, 2, 1, 2, 2), ref);
  EXPECT_CLOSE(conv1d(x[1], w, b, 2, 1, 2, 2), ref[1]);  // unbatched
}

TEST(Conv, ConvTranspose2dByHand) {
  // A 2x2 kernel of ones spreads each input pixel over a 2x2 block; the blocks overlap-add.
  Tensor x = tensor({{{{1., 2.}, {3., 4.}}}}), w = ones({1, 1, 2, 2}, kFloat32);
  EXPECT_CLOSE(conv_transpose2d(x, w), tensor({{{{1., 3., 2.}, {4., 10., 6.}, {3., 7., 4.}}}}));
  // Stride 2 places the blocks side by side; output_padding 1 adds a last row and column that
  // only the bias reaches.
  Tensor y = conv_transpose2d(x, w, tensor({0.5}), 2, 0, 1);
  EXPECT_CLOSE(y, tensor({{{{1.5, 1.5, 2.5, 2.5, 0.5},
                            {1.5, 1.5, 2.5, 2.5, 0.5},
                            {3.5, 3.5, 4.5, 4.5, 0.5},
                            {3.5, 3.5, 4.5, 4.5, 0.5},
                            {0.5, 0.5, 0.5, 0.5, 0.5}}}}));
}

TEST(Conv, ConvTranspose2dIsTheAdjoint) {
  // <conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for the same stride, padding, dilation
  // and groups, with output_padding making conv_transpose2d's output x's shape.
  struct Case {
    DimVector x, w;
    int64_t stride, padding, dilation, groups;
  };
  for (const Case& c : std::vector<Case>{{{2, 4, 9, 8}, {6, 2, 3, 3}, 2, 1, 1, 2},
                                         {{1, 3, 10, 11}, {5, 3, 3, 2}, 3, 2, 2, 1},
                                         {{2, 2, 6, 6}, {2, 2, 2, 2}, 1, 0, 1, 1}}) {
    Tensor x = randn(c.x, kFloat64), w = randn(c.w, kFloat64);
    Tensor cx = conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    Tensor y = randn(cx.sizes(), kFloat64);
    DimVector op(2);
    for (int d = 0; d < 2; ++d)
      op[d] = c.x[d + 2] -
              ((cx.size(d + 2) - 1) * c.stride - 2 * c.padding + c.dilation * (c.w[d + 2] - 1) + 1);
    Tensor ty = conv_transpose2d(y, w, {}, c.stride, c.padding, op, c.groups, c.dilation);
    ASSERT_EQ(ty.sizes().vec(), x.sizes().vec());
    EXPECT_CLOSE(dot(cx.flatten(), y.flatten()), dot(x.flatten(), ty.flatten()),
                 Tolerance{1e-10, 1e-10});
  }
}

TEST(Conv, Errors) {
  Tensor x = rand({1, 4, 5, 5}), w = rand({8, 4, 3, 3});
  EXPECT_EMBER_ERROR(conv2d(rand({4, 5}), w),
                     "conv2d: expected 3D (unbatched) or 4D (batched) input", "[4, 5]");
  EXPECT_EMBER_ERROR(conv2d(x, rand({8, 4, 3})), "conv2d: expected weight to be 4D", "[8, 4, 3]");
  EXPECT_EMBER_ERROR(conv2d(x, rand({8, 3, 3, 3})),
                     "conv2d: given groups=1, weight of size [8, 3, 3, 3]",
                     "expected input [1, 4, 5, 5] to have 3 channels, but got 4 channels instead");
  EXPECT_EMBER_ERROR(conv2d(x, rand({6, 2, 3, 3}), {}, 1, 0, 1, 4),
                     "conv2d: expected weight's output channels (6) to be divisible by groups (4)");
  EXPECT_EMBER_ERROR(conv2d(x, rand({6, 1, 3, 3}), {}, 1, 0, 1, 3), "conv2d: given groups=3",
                     "to have 3 channels, but got 4");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 1, 0, 1, 0), "conv2d: non-positive groups is not supported");
  EXPECT_EMBER_ERROR(conv2d(x, rand({8, 4, 6, 3})),
                     "conv2d: calculated padded input size per channel: (5 x 5)",
                     "kernel size: (6 x 3)", "kernel size can't be greater than actual input size");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 1, 0, 3), "conv2d: calculated padded input size",
                     "kernel size: (7 x 7)");
  EXPECT_EMBER_ERROR(conv2d(x, w.to(kFloat64)),
                     "conv2d: input type (float32) and weight type (float64) should be the same");
  EXPECT_EMBER_ERROR(conv2d(x, w, rand({8}, kFloat64)),
                     "conv2d: input type (float32) and bias type (float64)");
  EXPECT_EMBER_ERROR(conv2d(x.to(kInt64), w.to(kInt64)), "conv2d: expected a floating point input",
                     "int64");
  EXPECT_EMBER_ERROR(conv2d(x, w, rand({7})), "conv2d: expected bias of size [8], but got [7]");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 0), "conv2d: non-positive stride is not supported");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 1, -1), "conv2d: negative padding is not supported");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 1, 0, {1, 0}),
                     "conv2d: dilation should be greater than zero");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, {1, 1, 1}), "conv2d: expected stride to have 1 or 2 elements",
                     "[1, 1, 1]");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 2, "same"),
                     "conv2d: padding='same' is not supported for strided");
  EXPECT_EMBER_ERROR(conv2d(x, w, {}, 1, "full"), "conv2d: invalid padding string 'full'");
  EXPECT_EMBER_ERROR(conv2d(x, rand({8, 4, 0, 3})), "conv2d: expected a non-empty kernel");
  EXPECT_EMBER_ERROR(conv1d(rand({2, 3, 4, 4}), rand({2, 3, 3})),
                     "conv1d: expected 2D (unbatched) or 3D (batched)");
  EXPECT_EMBER_ERROR(conv1d(rand({2, 3, 2}), rand({2, 3, 3})),
                     "conv1d: calculated padded input size per channel: (2)", "kernel size: (3)");
  Tensor tw = rand({4, 2, 3, 3});
  EXPECT_EMBER_ERROR(conv_transpose2d(rand({1, 3, 5, 5}), tw),
                     "conv_transpose2d: given weight of size [4, 2, 3, 3]",
                     "to have 4 channels, but got 3 channels instead");
  EXPECT_EMBER_ERROR(conv_transpose2d(x, tw, {}, 1, 0, 0, 3),
                     "conv_transpose2d: expected input channels (4) to be divisible by groups (3)");
  EXPECT_EMBER_ERROR(
      conv_transpose2d(x, tw, {}, 2, 0, 2),
      "conv_transpose2d: output padding must be smaller than either stride or dilation");
  EXPECT_EMBER_ERROR(conv_transpose2d(rand({1, 4, 1, 1}), rand({4, 2, 1, 1}), {}, 1, 1),
                     "conv_transpose2d: given input size per channel (1 x 1)",
                     "output size per channel (-1 x -1) is too small");
  EXPECT_EMBER_ERROR(conv_transpose2d(x, tw, rand({4})),
                     "conv_transpose2d: expected bias of size [2], but got [4]");
}

Tensor plane(std::initializer_list<NestedList> rows) {
  return tensor(NestedList(rows))
      .to(kFloat32)
      .view({1, 1, -1, static_cast<int64_t>(rows.begin()->list().size())});
}

TEST(Pool, MaxPoolByHand) {
  Tensor x = arange(16.).view({1, 1, 4, 4});
  auto [v, i] = max_pool2d_with_indices(x, 2);
  EXPECT_CLOSE(v, tensor({{{{5., 7.}, {13., 15.}}}}));
  EXPECT_CLOSE(i, tensor({{{{5, 7}, {13, 15}}}}));
  EXPECT_EQ(i.dtype(), kInt64);
  // Padding 1, stride 1: the maximum of each pixel's 3x3 neighbourhood.
  Tensor y = plane({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  EXPECT_CLOSE(max_pool2d(y, 3, 1, 1), plane({{5, 6, 6}, {8, 9, 9}, {8, 9, 9}}));
  // Dilation 2: window {r, r + 2} x {c, c + 2}, whose maximum is x[r + 2, c + 2] = 5r + c + 12.
  Tensor z = arange(25.).view({1, 1, 5, 5});
  EXPECT_CLOSE(max_pool2d(z, 2, 1, 0, 2), plane({{12, 13, 14}, {17, 18, 19}, {22, 23, 24}}));
  // Unbatched input; rectangular kernel and stride.
  EXPECT_CLOSE(max_pool2d(arange(24.).view({2, 3, 4}), {1, 2}, {1, 2}),
               tensor({{{1., 3.}, {5., 7.}, {9., 11.}}, {{13., 15.}, {17., 19.}, {21., 23.}}}));
  // Integers keep their dtype.
  Tensor xi = arange(16).view({1, 1, 4, 4});
  EXPECT_CLOSE(max_pool2d(xi, 2), tensor({{{{5, 7}, {13, 15}}}}));
}

TEST(Pool, MaxPoolCeilMode) {
  Tensor z = arange(25.).view({1, 1, 5, 5});
  EXPECT_CLOSE(max_pool2d(z, 2), plane({{6, 8}, {16, 18}}));
  EXPECT_CLOSE(max_pool2d(z, 2, {}, 0, 1, true), plane({{6, 8, 9}, {16, 18, 19}, {21, 23, 24}}));
  // With padding 1, a 4th window would start in the right padding: ceil_mode drops it, leaving
  // rows (and columns) {0}, {1, 2}, {3, 4}.
  EXPECT_CLOSE(max_pool2d(z, 2, 2, 1, 1, true), plane({{0, 2, 4}, {10, 12, 14}, {20, 22, 24}}));
}

TEST(Pool, MaxPoolSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // NaN wins its window (PyTorch's rule); an all -inf window points at its first element.
  Tensor x = plane({{1, nan, 3, 4}, {-inf, -inf, 0, 2}});
  auto [v, i] = max_pool2d_with_indices(x, {1, 2});
  EXPECT_CLOSE(v, plane({{nan, 4}, {-inf, 2}}));
  EXPECT_CLOSE(i, tensor({{{{1, 3}, {4, 7}}}}));
  // Dilation 3 with padding 1 reads rows and columns -1 and 2 of a 2x2 input: none exists.
  auto [e, ei] = max_pool2d_with_indices(ones({1, 1, 2, 2}, kFloat32), 2, 1, 1, 3);
  EXPECT_CLOSE(e, full({1, 1, 1, 1}, -inf, kFloat32));
  EXPECT_CLOSE(ei, full({1, 1, 1, 1}, -1, kInt64));
}

TEST(Pool, AvgPoolByHand) {
  EXPECT_CLOSE(avg_pool2d(arange(16.).view({1, 1, 4, 4}), 2), plane({{2.5, 4.5}, {10.5, 12.5}}));
  // Padding 1, kernel 3, stride 2 on 1..9: each corner window holds 4 real pixels of 9.
  Tensor y = plane({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  EXPECT_CLOSE(avg_pool2d(y, 3, 2, 1), plane({{12. / 9, 16. / 9}, {24. / 9, 28. / 9}}));
  EXPECT_CLOSE(avg_pool2d(y, 3, 2, 1, false, false), plane({{3, 4}, {6, 7}}));
  EXPECT_CLOSE(avg_pool2d(y, 3, 2, 1, false, true, 2), plane({{6, 8}, {12, 14}}));
  // ceil_mode: the last windows hang past the input; count_include_pad does not count that part.
  Tensor z = arange(25.).view({1, 1, 5, 5});
  EXPECT_CLOSE(avg_pool2d(z, 2, {}, 0, true),
               plane({{3, 5, 6.5}, {13, 15, 16.5}, {20.5, 22.5, 24}}));
  EXPECT_CLOSE(avg_pool2d(arange(8.).view({2, 2, 2}), 2), tensor({{{1.5}}, {{5.5}}}));  // unbatched
}

TEST(Pool, AdaptiveAvgPoolByHand) {
  Tensor z = arange(25.).view({1, 1, 5, 5});
  // Windows [0, 3) and [2, 5) on each axis; the mean of 5r + c over a window is 5 r_mid + c_mid.
  EXPECT_CLOSE(adaptive_avg_pool2d(z, 2), plane({{6, 8}, {16, 18}}));
  EXPECT_CLOSE(adaptive_avg_pool2d(z, 1), plane({{12}}));
  EXPECT_CLOSE(adaptive_avg_pool2d(z, {5, 5}), z);
  // 2 -> 3 cells: windows [0, 1), [0, 2), [1, 2).
  EXPECT_CLOSE(adaptive_avg_pool2d(tensor({{{0., 2.}}}), {1, 3}), tensor({{{0., 1., 2.}}}));
  EXPECT_EQ(adaptive_avg_pool2d(z, {0, 3}).sizes().vec(), (std::vector<int64_t>{1, 1, 0, 3}));
}

TEST(Pool, Errors) {
  Tensor x = rand({1, 2, 4, 4});
  EXPECT_EMBER_ERROR(max_pool2d(rand({4, 4}), 2), "max_pool2d: expected a 3D or 4D input",
                     "[4, 4]");
  EXPECT_EMBER_ERROR(max_pool2d(rand({1, 0, 4, 4}), 2), "max_pool2d: expected a 3D or 4D input",
                     "[1, 0, 4, 4]");
  EXPECT_EMBER_ERROR(max_pool2d(x, 0), "max_pool2d: kernel_size must be greater than zero");
  EXPECT_EMBER_ERROR(max_pool2d(x, 2, 0), "max_pool2d: stride must be greater than zero");
  EXPECT_EMBER_ERROR(max_pool2d(x, 2, 2, 0, 0), "max_pool2d: dilation must be greater than zero");
  EXPECT_EMBER_ERROR(max_pool2d(x, 3, 1, 2),
                     "max_pool2d: pad should be at least 0 and at most half of kernel size");
  EXPECT_EMBER_ERROR(max_pool2d(x, {2, 2, 2}),
                     "max_pool2d: kernel_size must either be a single int or a pair");
  EXPECT_EMBER_ERROR(max_pool2d(x, 5), "max_pool2d: given input size (2 x 4 x 4)",
                     "output size (2 x 0 x 0) is too small");
  EXPECT_EMBER_ERROR(max_pool2d(x, 2, 1, 0, 4), "max_pool2d: given input size", "too small");
  EXPECT_EMBER_ERROR(max_pool2d(ones({1, 1, 2, 2}, kBool), 2),
                     "max_pool2d: not supported for bool");
  EXPECT_EMBER_ERROR(max_pool2d_with_indices(x, 5), "max_pool2d_with_indices: given input size");
  EXPECT_EMBER_ERROR(avg_pool2d(arange(16).view({1, 1, 4, 4}), 2),
                     "avg_pool2d: expected a floating point input", "int64");
  EXPECT_EMBER_ERROR(avg_pool2d(x, 2, 2, 0, false, true, 0),
                     "avg_pool2d: divisor must be not zero");
  EXPECT_EMBER_ERROR(avg_pool2d(x, 3, 1, 2), "avg_pool2d: pad should be");
  EXPECT_EMBER_ERROR(avg_pool2d(x, 6), "avg_pool2d: given input size", "too small");
  EXPECT_EMBER_ERROR(adaptive_avg_pool2d(x, {2, -1}),
                     "adaptive_avg_pool2d: elements of output_size", "[2, -1]");
  EXPECT_EMBER_ERROR(adaptive_avg_pool2d(rand({2, 2, 2, 2, 2}), 1),
                     "adaptive_avg_pool2d: expected a 3D or 4D input");
  EXPECT_EMBER_ERROR(adaptive_avg_pool2d(x.to(kInt32), 1),
                     "adaptive_avg_pool2d: expected a floating point input");
}

}  // namespace
}  // namespace ember::testing
