// Each layer's forward against PyTorch on fixed inputs (wave() in nn_test_util.h; the PyTorch
// lines that produced each expected value are quoted, run with float64 as the default dtype),
// gradcheck of each forward with respect to its input and parameters, and the layers' errors.
#include "ember/nn/activation.h"
#include "ember/nn/conv.h"
#include "ember/nn/dropout.h"
#include "ember/nn/embedding.h"
#include "ember/nn/linear.h"
#include "ember/nn/normalization.h"
#include "ember/nn/pooling.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

// --- Linear ---

nn::Linear make_linear() {
  // lin = nn.Linear(3, 2); lin.weight = wave([2,3]); lin.bias = wave([2], 0.5, 0.2)
  nn::Linear lin(3, 2);
  lin->to(kFloat64);
  assign(lin->weight, wave({2, 3}));
  assign(lin->bias, wave({2}, 0.5, 0.2));
  return lin;
}

TEST(NnLinear, ForwardMatchesPyTorch) {
  nn::Linear lin = make_linear();
  // lin(wave([4,3], 0.7, 0.3))
  Tensor expected = f64({{1.3476991697, 2.68336312664},
                         {-0.170681329209, 0.749379416775},
                         {-0.57743002424, -1.50110873118},
                         {1.35164146314, 2.70517532857}});
  EXPECT_CLOSE(lin(wave({4, 3}, 0.7, 0.3)), expected);
  // Leading dims: lin(wave([2,2,3], 0.7, 0.3)) is the same rows; also non-contiguous and 1-D.
  EXPECT_CLOSE(lin(wave({2, 2, 3}, 0.7, 0.3)), expected.view({2, 2, 2}));
  EXPECT_CLOSE(lin(non_contiguous(wave({2, 2, 3}, 0.7, 0.3))), expected.view({2, 2, 2}));
  EXPECT_CLOSE(lin(wave({4, 3}, 0.7, 0.3)[1]), expected[1]);
  // Without bias: x W^T.
  nn::Linear nobias(nn::LinearOptions(3, 2).bias(false));
  EXPECT_FALSE(nobias->bias.defined());
  EXPECT_EQ(nobias->parameters().size(), 1u);
  Tensor x = randn({5, 3});
  EXPECT_CLOSE(nobias(x), x.matmul(nobias->weight.t()));
}

TEST(NnLinear, Gradcheck) {
  nn::Linear lin = make_linear();
  gradcheck_module(
      *lin, [&](const Tensor& x) { return lin(x); }, wave({2, 2, 3}, 0.7, 0.3));
  gradcheck_module(
      *lin, [&](const Tensor& x) { return lin(x); }, wave({3, 3}, 0.7, 0.3));
}

TEST(NnLinear, Errors) {
  nn::Linear lin(4, 2);
  EXPECT_EMBER_ERROR(lin(randn({2, 5})), "Linear: input has 5 features, expected 4", "[2, 5]");
  EXPECT_EMBER_ERROR(lin(randn({})), "Linear", "0-dim");
  EXPECT_EMBER_ERROR(lin(randn({2, 4}, kFloat64)), "Linear", "float64", "float32");
  EXPECT_EMBER_ERROR(nn::Linear(-1, 2), "Linear", "negative", "-1");
  nn::Linear empty{nullptr};
  EXPECT_FALSE(empty);
  EXPECT_EMBER_ERROR(empty(randn({2, 4})), "ModuleHolder", "empty");
}

// --- Convolutions ---

TEST(NnConv1d, ForwardMatchesPyTorchAndGradcheck) {
  // c = nn.Conv1d(2, 4, 3, stride=2, padding=1, groups=2); c.weight = wave([4,1,3]);
  // c.bias = wave([4], 0.5, 0.2); c(wave([2,2,7], 0.7, 0.3))
  nn::Conv1d conv(nn::Conv1dOptions(2, 4, 3).stride(2).padding(1).groups(2));
  conv->to(kFloat64);
  ASSERT_TRUE(conv->weight.sizes().equals({4, 1, 3}));
  assign(conv->weight, wave({4, 1, 3}));
  assign(conv->bias, wave({4}, 0.5, 0.2));
  Tensor expected = f64({{{0.959101958937, 1.23476665676, -0.170681329209, -0.305124516796},
                          {1.72141802381, 3.05061229914, 0.749379416775, -0.905735062047},
                          {0.516028532404, 0.863543615398, 2.0405439703, 1.42829797559},
                          {1.85243064133, 0.179005671635, -0.423386424617, 0.787940275231}},
                         {{-0.814864008331, -0.562494138377, 0.950983694279, 0.731337879641},
                          {-0.892076728444, -1.48175761427, 1.43463992267, 2.43479340017},
                          {1.21647311917, 0.579197393647, -0.19488339624, 0.831086327982},
                          {0.586960772551, 2.22266048709, 2.09548980356, 0.879015156114}}});
  Tensor x = wave({2, 2, 7}, 0.7, 0.3);
  EXPECT_CLOSE(conv(x), expected);
  EXPECT_CLOSE(conv(x[1]), expected[1]);  // unbatched
  gradcheck_module(
      *conv, [&](const Tensor& in) { return conv(in); }, wave({1, 2, 5}, 0.7, 0.3));
}

TEST(NnConv2d, ForwardMatchesPyTorchAndGradcheck) {
  // c = nn.Conv2d(4, 6, (3,2), stride=(2,1), padding=(1,0), dilation=(1,2), groups=2);
  // c.weight = wave([6,2,3,2]); c.bias = wave([6], 0.5, 0.2); c(wave([1,4,5,5], 0.7, 0.3))
  nn::Conv2d conv(nn::Conv2dOptions(4, 6, {3, 2}).stride({2, 1}).padding({1, 0}).dilation({1, 2}).groups(2));
  conv->to(kFloat64);
  ASSERT_TRUE(conv->weight.sizes().equals({6, 2, 3, 2}));
  assign(conv->weight, wave({6, 2, 3, 2}));
  assign(conv->bias, wave({6}, 0.5, 0.2));
  Tensor expected = f64({{{{-0.0867854828791, 0.708427977053, 1.26389398045},
                           {0.447455247057, 0.567618994256, 0.514259949731},
                           {-0.0172997699446, -0.811862030527, -1.13115560189}},
                          {{-0.480021387291, -0.430497674966, 0.124481465095},
                           {0.851454726972, 0.728436881793, 0.565809433454},
                           {1.70073528449, 1.51365180072, 0.917659868089}},
                          {{1.82240895337, 1.00054845743, 0.146466933602},
                           {0.571745921944, 0.51777392, 0.658637298682},
                           {0.579531771333, 1.47475733228, 2.11473402178}},
                          {{0.0467951933056, -0.0450240036043, 0.350727747446},
                           {0.90477629816, 0.786947757613, 0.765400845809},
                           {2.10632530315, 2.05553881419, 1.50439575779}},
                          {{1.71442903651, 0.871253172954, -0.00143817972624},
                           {0.437467861209, 0.573155935435, 0.819528309238},
                           {0.430097023111, 1.23670212308, 1.84191538238}},
                          {{0.884797762605, 1.43030139761, 1.50411537191},
                           {0.713906312854, 0.758725686071, 0.647707949381},
                           {-0.483676693247, -0.866897150357, -0.641398896343}}}});
  EXPECT_CLOSE(conv(wave({1, 4, 5, 5}, 0.7, 0.3)), expected);
  gradcheck_module(
      *conv, [&](const Tensor& in) { return conv(in); }, wave({1, 4, 3, 4}, 0.7, 0.3));
}

TEST(NnConv2d, SamePaddingMatchesPyTorch) {
  // c = nn.Conv2d(2, 3, 3, padding='same', bias=False); c.weight = wave([3,2,3,3]);
  // c(wave([1,2,4,4], 0.7, 0.3))[0, :, 0]  (first row of each output channel)
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, 3).padding("same").bias(false));
  conv->to(kFloat64);
  assign(conv->weight, wave({3, 2, 3, 3}));
  Tensor y = conv(wave({1, 2, 4, 4}, 0.7, 0.3));
  ASSERT_TRUE(y.sizes().equals({1, 3, 4, 4}));
  EXPECT_CLOSE(y.select(2, 0)[0], f64({{2.01855954633, 1.90830161226, 0.312273117386, -0.501830450377},
                                       {2.42634316486, 2.84634571946, 1.28376073076, 0.0144092916237},
                                       {2.49366919168, 3.38499866763, 2.07511467918, 0.528627162689}}));
  EXPECT_CLOSE(y[0][2][3], f64({1.52244214, 1.81360149966, 0.739606448475, -0.286170654342}));
  // "valid" is no padding.
  nn::Conv2d valid(nn::Conv2dOptions(2, 3, 3).padding("valid"));
  EXPECT_TRUE(valid(randn({1, 2, 4, 4})).sizes().equals({1, 3, 2, 2}));
}

TEST(NnConvTranspose2d, ForwardMatchesPyTorchAndGradcheck) {
  // c = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2);
  // c.weight = wave([4,3,3,3]); c.bias = wave([6], 0.5, 0.2); y = c(wave([1,4,2,2], 0.7, 0.3))
  // y.shape == [1, 6, 4, 4]; y[0, :, :2, :] below
  nn::ConvTranspose2d conv(
      nn::ConvTranspose2dOptions(4, 6, 3).stride(2).padding(1).output_padding(1).groups(2));
  conv->to(kFloat64);
  ASSERT_TRUE(conv->weight.sizes().equals({4, 3, 3, 3}));
  assign(conv->weight, wave({4, 3, 3, 3}));
  assign(conv->bias, wave({6}, 0.5, 0.2));
  Tensor y = conv(wave({1, 4, 2, 2}, 0.7, 0.3));
  ASSERT_TRUE(y.sizes().equals({1, 6, 4, 4}));
  Tensor expected = f64({{{0.459269868681, 1.83523210923, 1.55376211789, 1.33903811484},
                          {1.62211223378, 3.32872046704, 1.56216851681, 1.35709135846}},
                         {{0.384506662656, -0.981577266993, -0.62317758191, -0.324786722277},
                          {-0.971001907887, -2.57419452786, -0.636726341247, -0.346884195365}},
                         {{1.18166878849, 2.48952535372, 2.06688061686, 1.69538368343},
                          {2.6818687988, 4.12490489514, 2.08509221287, 1.72074330233}},
                         {{0.924036835904, 1.50697289255, 1.12517426124, 1.02266969127},
                          {3.22207922942, 4.93067111739, 2.62086883923, 2.21641863008}},
                         {{0.688254524502, 0.15977954478, 0.725761114841, 0.832218016626},
                          {-1.40647053763, -2.90041731364, -0.639500488792, -0.142175460699}},
                         {{0.731235959038, 1.18654583896, 0.456412803045, 0.349771339732},
                          {2.54850624338, 3.77493347484, 1.64292148294, 1.07032318575}}});
  EXPECT_CLOSE(y[0].narrow(1, 0, 2), expected);
  gradcheck_module(
      *conv, [&](const Tensor& in) { return conv(in); }, wave({1, 4, 2, 2}, 0.7, 0.3));
}

TEST(NnConvTranspose2d, OutputSizeMatchesPyTorch) {
  // c = nn.ConvTranspose2d(2, 3, 3, stride=2, bias=False); c.weight = wave([2,3,3,3]);
  // y = c(wave([1,2,2,2], 0.7, 0.3), output_size=[6, 6]); y[0, 0] (last row and column zero)
  nn::ConvTranspose2d conv(nn::ConvTranspose2dOptions(2, 3, 3).stride(2).bias(false));
  conv->to(kFloat64);
  assign(conv->weight, wave({2, 3, 3, 3}));
  Tensor x = wave({1, 2, 2, 2}, 0.7, 0.3);
  Tensor y = conv->forward(x, {6, 6});
  ASSERT_TRUE(y.sizes().equals({1, 3, 6, 6}));
  EXPECT_CLOSE(y[0][0][2],
               f64({0.908211476459, 1.42344290298, 3.13005113625, 1.36349918601, 1.15842202767, 0}));
  EXPECT_CLOSE(y[0][0][5], zeros({6}, kFloat64));
  EXPECT_TRUE(conv(x).sizes().equals({1, 3, 5, 5}));
  EXPECT_CLOSE(conv->forward(x, {1, 3, 6, 6}), y);
  EXPECT_EMBER_ERROR(conv->forward(x, {7, 7}), "ConvTranspose2d: requested an output size of [7, 7]",
                     "[5, 5] to [6, 6]");
  EXPECT_EMBER_ERROR(conv->forward(x, {6}), "ConvTranspose2d", "output_size must have 2 or 4 elements");
}

// conv3d by its definition, in float64 loops: out[n, o, z, y, x] = bias[o] + the sum over the
// input channels of o's group and the kernel of w[o, c, i, j, k] * in[n, c, z*s - p + i*d, ...]
// (zero outside the input).
Tensor conv3d_by_definition(const Tensor& in, const Tensor& w, const Tensor& b, IntArrayRef s, IntArrayRef p,
                            IntArrayRef d, int64_t groups) {
  const Tensor x = in.contiguous(), wt = w.contiguous();
  const int64_t n = x.size(0), cin = x.size(1), cout = wt.size(0), per_group = cin / groups;
  DimVector size_in(3), kernel(3), size_out(3);
  for (int64_t a = 0; a < 3; ++a) {
    size_in[a] = x.size(a + 2), kernel[a] = wt.size(a + 2);
    size_out[a] = (size_in[a] + 2 * p[a] - d[a] * (kernel[a] - 1) - 1) / s[a] + 1;
  }
  Tensor out = zeros({n, cout, size_out[0], size_out[1], size_out[2]}, kFloat64);
  const double *px = x.data_ptr<double>(), *pw = wt.data_ptr<double>();
  double* po = out.data_ptr<double>();
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t z = 0; z < size_out[0]; ++z)
        for (int64_t y = 0; y < size_out[1]; ++y)
          for (int64_t xo = 0; xo < size_out[2]; ++xo) {
            double acc = b.defined() ? b[o].item<double>() : 0;
            for (int64_t c = 0; c < per_group; ++c)
              for (int64_t i = 0; i < kernel[0]; ++i)
                for (int64_t j = 0; j < kernel[1]; ++j)
                  for (int64_t k = 0; k < kernel[2]; ++k) {
                    const int64_t zi = z * s[0] - p[0] + i * d[0], yi = y * s[1] - p[1] + j * d[1],
                                  xi = xo * s[2] - p[2] + k * d[2];
                    if (zi < 0 || zi >= size_in[0] || yi < 0 || yi >= size_in[1] || xi < 0 ||
                        xi >= size_in[2])
                      continue;
                    const int64_t ci = o / (cout / groups) * per_group + c;
                    acc += pw[(((o * per_group + c) * kernel[0] + i) * kernel[1] + j) * kernel[2] + k] *
                           px[(((b0 * cin + ci) * size_in[0] + zi) * size_in[1] + yi) * size_in[2] + xi];
                  }
            po[(((b0 * cout + o) * size_out[0] + z) * size_out[1] + y) * size_out[2] + xo] = acc;
          }
  return out;
}

TEST(NnConv3d, ForwardMatchesTheDefinitionAndGradcheck) {
  nn::Conv3d conv(
      nn::Conv3dOptions(4, 6, {3, 2, 2}).stride({2, 1, 1}).padding({1, 0, 1}).dilation({1, 2, 1}).groups(2));
  conv->to(kFloat64);
  ASSERT_TRUE(conv->weight.sizes().equals({6, 2, 3, 2, 2}));
  EXPECT_EQ(conv->named_parameters().keys(), (std::vector<std::string>{"weight", "bias"}));
  const Tensor x = wave({2, 4, 5, 6, 4}, 0.7, 0.3);
  const Tensor want =
      conv3d_by_definition(x, conv->weight, conv->bias, {2, 1, 1}, {1, 0, 1}, {1, 2, 1}, /*groups=*/2);
  ASSERT_TRUE(want.sizes().equals({2, 6, 3, 4, 5}));
  EXPECT_CLOSE(conv(x), want);
  EXPECT_CLOSE(conv(x[1]), want[1]);  // unbatched
  nn::Conv3d same(nn::Conv3dOptions(2, 3, {2, 3, 1}).padding("same").bias(false));
  same->to(kFloat64);
  const Tensor xs = wave({1, 2, 4, 3, 3}, 0.4, 0.2);
  // "same" pads (0, 1) along depth (the odd one at the end), (1, 1) along the height.
  const Tensor padded = pad(xs, {0, 0, 1, 1, 0, 1});
  EXPECT_CLOSE(same(xs),
               conv3d_by_definition(padded, same->weight, Tensor(), {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1));
  std::ostringstream repr;
  repr << *conv;
  EXPECT_EQ(repr.str(),
            "Conv3d(4, 6, kernel_size=(3, 2, 2), stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1), "
            "groups=2)");
  gradcheck_module(
      *conv, [&](const Tensor& in) { return conv(in); }, wave({1, 4, 3, 4, 3}, 0.7, 0.3));
}

TEST(NnConv, Errors) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3));
  EXPECT_EMBER_ERROR(conv(randn({1, 4, 5, 5})), "Conv2d: input has 4 channels, expected 3", "[1, 4, 5, 5]");
  EXPECT_EMBER_ERROR(conv(randn({3, 5})), "Conv2d: expected 3D (unbatched) or 4D (batched) input", "2D",
                     "[3, 5]");
  EXPECT_EMBER_ERROR(conv(randn({1, 3, 5, 5}, kFloat64)), "Conv2d", "float64");
  nn::Conv1d conv1(nn::Conv1dOptions(2, 2, 3));
  EXPECT_EMBER_ERROR(conv1(randn({1, 2, 3, 4})), "Conv1d: expected 2D (unbatched) or 3D (batched) input",
                     "4D");
  EXPECT_EMBER_ERROR(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).groups(2)), "Conv2d: in_channels (3)",
                     "divisible by groups (2)");
  EXPECT_EMBER_ERROR(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).groups(4)), "Conv2d: out_channels (6)");
  EXPECT_EMBER_ERROR(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).groups(0)), "Conv2d: groups must be a positive");
  EXPECT_EMBER_ERROR(nn::Conv2d(nn::Conv2dOptions(4, 6, {3, 0})), "Conv2d: kernel_size must be positive",
                     "(3, 0)");
  EXPECT_EMBER_ERROR(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).stride(2).padding("same")),
                     "Conv2d: padding=\"same\" is not supported for strided convolutions");
  EXPECT_EMBER_ERROR(nn::Conv2dOptions(4, 6, 3).padding(nn::ConvPadding<2>(std::string("full"))),
                     "ConvPadding", "\"full\"");
  EXPECT_EMBER_ERROR(nn::Conv2dOptions(4, 6, {3, 3, 3}), "ExpandingArray: expected 2 values, got 3");
  nn::ConvTranspose2d convt(nn::ConvTranspose2dOptions(4, 2, 3));
  EXPECT_EMBER_ERROR(convt(randn({1, 2, 3, 3})), "ConvTranspose2d: input has 2 channels, expected 4");
}

// --- Normalization ---

TEST(NnBatchNorm, TwoTrainingStepsAndEvalMatchPyTorch) {
  // bn = nn.BatchNorm2d(3); bn.weight = wave([3], 0.5, 0.2); bn.bias = wave([3], 0.9, 0.4)
  // y1 = bn(wave([2,3,2,2], 0.7, 0.3)); y2 = bn(wave([2,3,2,2], 1.3, 0.5) * 2)
  nn::BatchNorm2d bn(3);
  bn->to(kFloat64);
  assign(bn->weight, wave({3}, 0.5, 0.2));
  assign(bn->bias, wave({3}, 0.9, 0.4));
  bn(wave({2, 3, 2, 2}, 0.7, 0.3));
  Tensor y2 = bn(wave({2, 3, 2, 2}, 1.3, 0.5) * 2);
  // y2[0]
  EXPECT_CLOSE(y2[0], f64({{{0.525273106091, 0.662953205828}, {0.40334787831, 0.126779536542}},
                           {{0.400267487953, 1.629042603}, {1.87851222731, 0.783202776831}},
                           {{-0.40070800589, 0.364734803642}, {1.76060000656, 1.74194181042}}}));
  EXPECT_CLOSE(bn->running_mean, f64({0.0195275704214, -0.0272947150426, 0.0335618763004}));
  EXPECT_CLOSE(bn->running_var, f64({1.0887578282, 1.03291853323, 1.12086478868}));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);
  // bn.eval(); bn(wave([1,3,2,2], 0.3, 0.0))[0]: the running statistics, which stay put.
  bn->eval();
  Tensor expected = f64({{{0.385700325047, 0.441966885912}, {0.493207322472, 0.534844479134}},
                         {{1.57164733446, 1.61313760914}, {1.59814835263, 1.52801851058}},
                         {{1.37359448543, 1.15519424826}, {0.90318525009, 0.640078704183}}});
  EXPECT_CLOSE(bn(wave({1, 3, 2, 2}, 0.3, 0.0))[0], expected);
  EXPECT_CLOSE(bn(wave({1, 3, 2, 2}, 0.3, 0.0))[0], expected);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
}

TEST(NnBatchNorm, CumulativeAverageWithoutMomentum) {
  // bn = nn.BatchNorm1d(3, momentum=None, affine=False)
  // for k in range(3): bn(wave([4,3], 0.7 + 0.2*k, 0.3*k) * (k+1))
  nn::BatchNorm1d bn(nn::BatchNormOptions(3).momentum(std::nullopt).affine(false));
  bn->to(kFloat64);
  EXPECT_TRUE(bn->parameters().empty());
  for (int k = 0; k < 3; ++k) bn(wave({4, 3}, 0.7 + 0.2 * k, 0.3 * k) * (k + 1));
  EXPECT_CLOSE(bn->running_mean, f64({0.0718416591174, 0.195877381236, 0.177867294214}));
  EXPECT_CLOSE(bn->running_var, f64({2.79801214007, 4.18759206456, 1.76637086471}));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 3);
}

TEST(NnBatchNorm, WithoutRunningStatsUsesBatchStatisticsInEval) {
  nn::BatchNorm1d bn(nn::BatchNormOptions(2).track_running_stats(false));
  EXPECT_TRUE(bn->buffers().empty());
  bn->eval();
  Tensor x = randn({5, 2});
  Tensor mean = x.mean({0}, true), var = x.var({0}, 0, true);
  EXPECT_CLOSE(bn(x), (x - mean) / (var + 1e-5).sqrt(), Tolerance{1e-5, 1e-5});
  // 3D input [N, C, L] normalizes over N and L.
  Tensor x3 = randn({2, 2, 3});
  Tensor m3 = x3.mean({0, 2}, true), v3 = x3.var({0, 2}, 0, true);
  EXPECT_CLOSE(bn(x3), (x3 - m3) / (v3 + 1e-5).sqrt(), Tolerance{1e-5, 1e-5});
}

TEST(NnBatchNorm, Gradcheck) {
  nn::BatchNorm2d bn(3);
  bn->to(kFloat64);
  assign(bn->weight, wave({3}, 0.5, 0.2));
  assign(bn->bias, wave({3}, 0.9, 0.4));
  gradcheck_module(
      *bn, [&](const Tensor& x) { return bn(x); }, wave({2, 3, 2, 1}, 0.7, 0.3));
  bn->eval();
  gradcheck_module(
      *bn, [&](const Tensor& x) { return bn(x); }, wave({2, 3, 2, 1}, 0.7, 0.3));
}

TEST(NnBatchNorm, Errors) {
  nn::BatchNorm2d bn(3);
  EXPECT_EMBER_ERROR(bn(randn({2, 3, 4})), "BatchNorm2d: expected 4D input, got 3D input [2, 3, 4]");
  EXPECT_EMBER_ERROR(bn(randn({2, 4, 2, 2})), "BatchNorm2d: input has 4 channels, expected 3");
  EXPECT_EMBER_ERROR(bn(randn({1, 3, 1, 1})),
                     "BatchNorm2d: expected more than 1 value per channel when training", "[1, 3, 1, 1]");
  EXPECT_EMBER_ERROR(bn(randn({2, 3, 2, 2}, kFloat64)), "BatchNorm2d", "float64");
  nn::BatchNorm1d bn1(3);
  EXPECT_EMBER_ERROR(bn1(randn({2, 3, 4, 5})), "BatchNorm1d: expected 2D or 3D input, got 4D input");
  EXPECT_EMBER_ERROR(nn::BatchNorm1d(0), "BatchNorm1d: num_features must be positive");
  // A failed step leaves the running statistics alone.
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 0);
}

TEST(NnLayerNorm, ForwardMatchesPyTorchAndGradcheck) {
  // ln = nn.LayerNorm([3,4]); ln.weight = wave([3,4], 0.5, 0.2); ln.bias = wave([3,4], 0.9, 0.4)
  // ln(wave([2,3,4], 0.7, 0.3))[1]
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}));
  ln->to(kFloat64);
  assign(ln->weight, wave({3, 4}, 0.5, 0.2));
  assign(ln->bias, wave({3, 4}, 0.9, 0.4));
  EXPECT_CLOSE(ln(wave({2, 3, 4}, 0.7, 0.3))[1],
               f64({{0.58588413329, 0.984141524462, -0.069930875999, -1.42220747528},
                    {-1.82233657397, -1.2142447593, -0.492962756843, -0.274980171464},
                    {-0.317169644417, -0.171331495019, 0.0188197756651, -0.237911856169}}));
  gradcheck_module(
      *ln, [&](const Tensor& x) { return ln(x); }, wave({2, 3, 4}, 0.7, 0.3));
  nn::LayerNorm plain(nn::LayerNormOptions({4}).elementwise_affine(false));
  EXPECT_TRUE(plain->parameters().empty());
  nn::LayerNorm no_bias(nn::LayerNormOptions({4}).bias(false));
  EXPECT_EQ(keys_of(no_bias->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_EMBER_ERROR(ln(randn({2, 4, 3}, kFloat64)), "LayerNorm: expected input with trailing dims [3, 4]",
                     "[2, 4, 3]");
  EXPECT_EMBER_ERROR(nn::LayerNorm(nn::LayerNormOptions({})), "LayerNorm", "empty");
}

TEST(NnGroupNorm, ForwardMatchesPyTorchAndGradcheck) {
  // gn = nn.GroupNorm(2, 4); gn.weight = wave([4], 0.5, 0.2); gn.bias = wave([4], 0.9, 0.4)
  // gn(wave([2,4,3], 0.7, 0.3))[1]
  nn::GroupNorm gn(2, 4);
  gn->to(kFloat64);
  assign(gn->weight, wave({4}, 0.5, 0.2));
  assign(gn->bias, wave({4}, 0.9, 0.4));
  EXPECT_CLOSE(gn(wave({2, 4, 3}, 0.7, 0.3))[1], f64({{0.748580973591, 0.524217799903, 0.295758158661},
                                                      {0.254166789909, 0.374417492986, 0.964046098389},
                                                      {0.744469670025, 1.63755206992, 1.85190054554},
                                                      {0.550380469995, -0.597563133567, -1.7522000651}}));
  gradcheck_module(
      *gn, [&](const Tensor& x) { return gn(x); }, wave({2, 4, 3}, 0.7, 0.3));
  EXPECT_EMBER_ERROR(gn(randn({2, 3, 3}, kFloat64)), "GroupNorm: input has 3 channels, expected 4");
  EXPECT_EMBER_ERROR(gn(randn({4}, kFloat64)), "GroupNorm: expected an input [N, C, *]", "[4]");
  EXPECT_EMBER_ERROR(nn::GroupNorm(3, 4), "GroupNorm: num_channels (4) must be divisible by num_groups (3)");
}

TEST(NnRMSNorm, ForwardMatchesPyTorchAndGradcheck) {
  // rn = nn.RMSNorm([4]); rn.weight = wave([4], 0.5, 0.2); rn(wave([3,4], 0.7, 0.3))
  nn::RMSNorm rn(nn::RMSNormOptions({4}));
  rn->to(kFloat64);
  assign(rn->weight, wave({4}, 0.5, 0.2));
  EXPECT_CLOSE(rn(wave({3, 4}, 0.7, 0.3)),
               f64({{0.0785423476135, 0.7251997692, 1.23647373373, 0.896091691245},
                    {0.0113681344954, -0.542438092362, -1.2538085943, -1.20563580293},
                    {-0.106686609838, 0.288269760146, 1.1384836668, 1.40918887711}}));
  gradcheck_module(
      *rn, [&](const Tensor& x) { return rn(x); }, wave({3, 4}, 0.7, 0.3));
  // nn.RMSNorm([2, 2], eps=0.5, elementwise_affine=False)(wave([2,2,2], 0.7, 0.3))
  nn::RMSNorm plain(nn::RMSNormOptions({2, 2}).eps(0.5).elementwise_affine(false));
  EXPECT_CLOSE(plain(wave({2, 2, 2}, 0.7, 0.3)),
               f64({{{0.287202118454, 0.817785870498}, {0.96375214939, 0.656450733382}},
                    {{0.0410097001017, -0.60345620161}, {-0.964107222441, -0.871323551967}}}));
  // The default eps is float32's epsilon for float32 (it matters for tiny inputs):
  // nn.RMSNorm([4], dtype=torch.float32)(wave([2,4], 0.7, 0.3).float() * 1e-4)
  nn::RMSNorm rn32(nn::RMSNormOptions({4}));
  EXPECT_CLOSE(rn32((wave({2, 4}, 0.7, 0.3) * 1e-4).to(kFloat32)),
               tensor({{0.0836537182331, 0.238197490573, 0.280713289976, 0.191205218434},
                       {0.0117848673835, -0.173413902521, -0.277053385973, -0.250390350819}}));
  EXPECT_EMBER_ERROR(rn(randn({3, 5}, kFloat64)), "RMSNorm: expected input with trailing dims [4]", "[3, 5]");
}

// --- Embedding ---

TEST(NnEmbedding, ForwardAndPaddingGradientMatchPyTorch) {
  // e = nn.Embedding(5, 3, padding_idx=1); e.weight = wave([5,3]); idx = [[0,1],[4,1],[4,2]]
  // out = e(idx); (out * wave([3,2,3], 0.7, 0.3)).sum().backward(); e.weight.grad
  nn::Embedding emb(nn::EmbeddingOptions(5, 3).padding_idx(1));
  emb->to(kFloat64);
  assign(emb->weight, wave({5, 3}));
  Tensor idx = tensor({{0, 1}, {4, 1}, {4, 2}});
  Tensor out = emb(idx);
  EXPECT_CLOSE(out, f64({{{0.0998334166468, 0.452886285379, 0.744643119971},
                          {0.935616001553, 0.999957646499, 0.928959715004}},
                         {{-0.985177781504, -0.980538397794, -0.843187741856},
                          {0.935616001553, 0.999957646499, 0.928959715004}},
                         {{-0.985177781504, -0.980538397794, -0.843187741856},
                          {0.73223144403, 0.43639908216, 0.0815021517603}}}));
  (out * wave({3, 2, 3}, 0.7, 0.3)).sum().backward();
  EXPECT_CLOSE(emb->weight.grad(), f64({{0.295520206661, 0.841470984808, 0.991664810452},
                                        {0, 0, 0},
                                        {-0.980936230066, -0.875452174688, -0.358229282237},
                                        {0, 0, 0},
                                        {-0.314560887583, -0.858679230267, -0.998947313723}}));
  EXPECT_CLOSE(emb(idx.to(kInt32)), out);
  // (The padding row's gradient is zero by design, so gradcheck looks at the other rows.)
  Tensor rows = tensor({{0, 2}, {4, 4}});
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>&) { return emb(rows); }, {emb->weight}));
}

TEST(NnEmbedding, FromPretrained) {
  Tensor table = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}});
  nn::Embedding frozen = nn::Embedding::from_pretrained(table);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_CLOSE(frozen(tensor({2, 0}, kInt64)), tensor({{5.0, 6.0}, {1.0, 2.0}}));
  table.fill_(0);  // a copy: the embedding keeps its values
  EXPECT_CLOSE(frozen->weight, tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}));
  nn::Embedding trained = nn::Embedding::from_pretrained(tensor({{1.0}, {2.0}}), /*freeze=*/false, 1);
  EXPECT_TRUE(trained->weight.requires_grad());
  EXPECT_EQ(*trained->options.padding_idx(), 1);
  EXPECT_CLOSE(trained->weight, tensor({{1.0}, {2.0}}));  // the padding row as given
  trained(tensor({0, 1}, kInt64)).sum().backward();
  EXPECT_CLOSE(trained->weight.grad(), tensor({{1.0}, {0.0}}));
  EXPECT_EMBER_ERROR(nn::Embedding::from_pretrained(ones({3})), "Embedding::from_pretrained", "2-D", "[3]");
  EXPECT_EMBER_ERROR(nn::Embedding::from_pretrained(ones({2, 2}, kInt64)), "Embedding::from_pretrained",
                     "floating point");
}

TEST(NnEmbedding, InitAndErrors) {
  manual_seed(3);
  // A negative padding_idx counts from the end; that row starts at zero, the rest ~ N(0, 1).
  nn::Embedding emb(nn::EmbeddingOptions(400, 50).padding_idx(-2));
  EXPECT_EQ(*emb->options.padding_idx(), 398);
  EXPECT_CLOSE(emb->weight[398], zeros({50}));
  Tensor rest = emb->weight.narrow(0, 0, 398);
  EXPECT_NEAR(rest.mean().item<double>(), 0, 0.02);
  EXPECT_NEAR(rest.std().item<double>(), 1, 0.02);
  EXPECT_EMBER_ERROR(emb(tensor({1.0, 2.0})),
                     "Embedding: expected indices of dtype int64 or int32, got float32");
  EXPECT_EMBER_ERROR(
      nn::Embedding(nn::EmbeddingOptions(5, 3).padding_idx(5)),
      "Embedding: padding_idx must be within [-num_embeddings, num_embeddings) = [-5, 5), got 5");
  EXPECT_EMBER_ERROR(nn::Embedding(-1, 3), "Embedding", "negative");
}

// --- Activations, Dropout, Flatten, Identity ---

TEST(NnActivations, ForwardMatchesPyTorchAndGradcheck) {
  // x = wave([7], 0.9, -2.0) * 3; nn.ReLU()(x), nn.GELU()(x), ...
  Tensor x = wave({7}, 0.9, -2.0) * 3;
  struct Case {
    std::function<Tensor(const Tensor&)> fn;
    Tensor expected;
  };
  nn::ReLU relu;
  nn::GELU gelu;
  nn::GELU gelu_tanh(nn::GELUOptions().approximate("tanh"));
  nn::SiLU silu;
  nn::Tanh tanh_;
  nn::Sigmoid sigmoid_;
  std::vector<Case> cases = {
      {relu, f64({0, 0, 0, 1.93265306171, 2.99872080912, 1.79541643231, 0})},
      {gelu, f64({-0.00869384984447, -0.0100310235532, -0.164250829043, 1.88116819773, 2.99465580886,
                  1.73025414822, -0.169924169573})},
      {gelu_tanh, f64({-0.00822127367768, -0.00955830350462, -0.16428300562, 1.88120826893, 2.99506857267,
                       1.73018489223, -0.169997957309})},
      {silu, f64({-0.167349157283, -0.172576735518, -0.211736328637, 1.68825513409, 2.85633046119,
                  1.53973129303, -0.243180582914})},
      {tanh_, f64({-0.991493288234, -0.990522615857, -0.534202855191, 0.958947308625, 0.995042117064,
                   0.946329280469, -0.644961671642})},
      {sigmoid_, f64({0.0613474214071, 0.0645479167746, 0.355257532352, 0.873542782994, 0.952516303784,
                      0.857590063964, 0.317210005207})},
  };
  for (const Case& c : cases) {
    EXPECT_CLOSE(c.fn(x), c.expected);
    EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return c.fn(in[0]); },
                                    {x.clone().requires_grad_()}));
  }
  // nn.Softmax(dim=0)(wave([2,3], 0.9, -2.0) * 3)
  nn::Softmax softmax(0);
  EXPECT_CLOSE(softmax(wave({2, 3}, 0.9, -2.0) * 3),
               f64({{0.00937262412649, 0.00342800512398, 0.0838289688264},
                    {0.990627375874, 0.996571994876, 0.916171031174}}));
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0]); },
                                  {wave({2, 3}).requires_grad_()}));
  // ReLU(inplace) overwrites its input.
  nn::ReLU inplace(nn::ReLUOptions(true));
  Tensor y = x.clone();
  EXPECT_TRUE(inplace(y).is_same(y));
  EXPECT_CLOSE(y, cases[0].expected);
  EXPECT_EMBER_ERROR(nn::GELU(nn::GELUOptions().approximate("fast")), "GELU: approximate must be",
                     "\"fast\"");
}

// ReLU6, Hardswish and LeakyReLU by hand, at and around their kinks (-3, 0, 3, 6), and gradcheck
// away from them.
TEST(NnActivations, ReLU6HardswishLeakyReLUByHand) {
  Tensor x = f64({-4, -3, -1, 0, 2, 3, 4, 7});
  nn::ReLU6 relu6;
  nn::Hardswish hardswish;
  nn::LeakyReLU leaky(nn::LeakyReLUOptions().negative_slope(0.2));
  EXPECT_CLOSE(relu6(x), f64({0, 0, 0, 0, 2, 3, 4, 6}));
  EXPECT_CLOSE(hardswish(x), f64({0, 0, -1.0 / 3, 0, 5.0 / 3, 3, 4, 7}));
  EXPECT_CLOSE(leaky(x), f64({-0.8, -0.6, -0.2, 0, 2, 3, 4, 7}));
  EXPECT_EQ(leaky->extra_repr(), "negative_slope=0.2");
  Tensor smooth = f64({-4.5, -1.2, 0.7, 2.5, 4.5, 7.3}).requires_grad_();
  for (std::function<Tensor(const Tensor&)> fn :
       {std::function<Tensor(const Tensor&)>(relu6), std::function<Tensor(const Tensor&)>(hardswish),
        std::function<Tensor(const Tensor&)>(leaky)})
    EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return fn(in[0]); }, {smooth}));
  // hardswish's slope: 0 below -3, x / 3 + 1/2 between, 1 above 3.
  hardswish(smooth).sum().backward();
  EXPECT_CLOSE(smooth.grad(), f64({0, 0.1, 0.7 / 3 + 0.5, 2.5 / 3 + 0.5, 1, 1}));
}

// F.normalize and F.cosine_similarity by hand (a zero row stays zero: the norm is clamped to eps),
// broadcasting, and gradcheck.
TEST(NnFunctional, NormalizeAndCosineSimilarity) {
  namespace F = nn::functional;
  Tensor x = f64({{3, 4}, {0, 0}});
  EXPECT_CLOSE(F::normalize(x), f64({{0.6, 0.8}, {0, 0}}));
  EXPECT_CLOSE(F::normalize(x, 1.0), f64({{3.0 / 7, 4.0 / 7}, {0, 0}}));
  EXPECT_CLOSE(F::normalize(f64({{3, 4}, {4, 3}}), 2.0, 0), f64({{0.6, 0.8}, {0.8, 0.6}}));
  EXPECT_CLOSE(F::cosine_similarity(f64({{1, 0}, {1, 1}, {0, 0}}), f64({{1, 1}})),
               f64({1 / std::sqrt(2.0), 1, 0}));
  EXPECT_CLOSE(F::cosine_similarity(f64({{1, 2}, {-2, -4}}), f64({{2, 4}, {1, 2}}), 1), f64({1, -1}));
  Tensor a = wave({3, 4}).requires_grad_(), b = wave({3, 4}, 0.7, 0.3).requires_grad_();
  EXPECT_TRUE(
      autograd::gradcheck([](const std::vector<Tensor>& in) { return F::normalize(in[0], 2.0, 1); }, {a}));
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return F::cosine_similarity(in[0], in[1], 1); }, {a, b}));
  EXPECT_EMBER_ERROR(F::normalize(ones({2}, kInt64)), "normalize", "floating point");
  EXPECT_EMBER_ERROR(F::cosine_similarity(ones({2, 3}), ones({2, 4})), "cosine_similarity", "[2, 3]");
}

TEST(NnDropout, TrainingDropsAndScalesEvalIsIdentity) {
  manual_seed(0);
  nn::Dropout drop(0.25);
  Tensor x = ones({1000});
  Tensor y = drop(x);
  // Kept elements are scaled by 1 / (1 - p); about a quarter are dropped.
  Tensor kept = y.ne(0);
  EXPECT_CLOSE(y.masked_fill(kept.logical_not(), 1.0 / 0.75), full({1000}, 1.0 / 0.75));
  EXPECT_NEAR(kept.to(kFloat64).mean().item<double>(), 0.75, 0.05);
  drop->eval();
  EXPECT_TRUE(drop(x).is_same(x));
  drop->train();
  EXPECT_FALSE(drop(x).is_same(x));
  EXPECT_CLOSE(nn::Dropout(0.0)(x), x);
  // The same seed draws the same mask, so gradcheck sees one function: grad = mask / (1 - p).
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        manual_seed(4);
        return drop(in[0]);
      },
      {wave({6}).requires_grad_()}));
  EXPECT_EMBER_ERROR(nn::Dropout(1.5), "Dropout: dropout probability has to be between 0 and 1, got 1.5");
}

TEST(NnFlattenAndIdentity, Shapes) {
  Tensor x = randn({2, 3, 4, 5});
  EXPECT_TRUE(nn::Flatten()(x).sizes().equals({2, 60}));
  EXPECT_TRUE(nn::Flatten(nn::FlattenOptions().start_dim(0).end_dim(1))(x).sizes().equals({6, 4, 5}));
  EXPECT_TRUE(nn::Identity()(x).is_same(x));
}

// --- Pooling ---

TEST(NnPooling, ForwardMatchesPyTorchAndGradcheck) {
  Tensor x = wave({1, 2, 5, 5}, 0.7, 0.3);
  // nn.MaxPool2d(3, stride=2, padding=1)(x)[0]
  nn::MaxPool2d maxpool(nn::MaxPool2dOptions(3).stride(2).padding(1));
  EXPECT_CLOSE(maxpool(x)[0], f64({{{0.841470984808, 0.991664810452, 0.675463180551},
                                    {0.989358246623, 0.989358246623, 0.859161814856},
                                    {0.986771964275, 0.650287840157, 0.859161814856}},
                                   {{0.63742259615, 0.867644100642, 0.983906694619},
                                    {0.63742259615, 0.980763247745, 0.980763247745},
                                    {0.883870423546, 0.977342512392, 0.611155146263}}}));
  // nn.MaxPool2d(2, return_indices=True)(x)[1][0]
  auto [values, indices] = nn::MaxPool2d(2)->forward_with_indices(x);
  EXPECT_CLOSE(indices[0], tensor({{{1, 2}, {11, 12}}, {{5, 3}, {11, 13}}}));
  // nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)(x)[0]
  nn::AvgPool2d avgpool(nn::AvgPool2dOptions(3).stride(2).padding(1).count_include_pad(false));
  EXPECT_CLOSE(avgpool(x)[0], f64({{{-0.113099204285, 0.0456229229327, 0.163677135417},
                                    {-0.267663591018, -0.162662839316, 0.0873342882063},
                                    {-0.0548321500808, -0.147677112699, -0.108883858359}},
                                   {{-0.145277877774, -0.129708460348, 0.00148205863243},
                                    {-0.00471711154937, -0.214901833872, -0.233524751424},
                                    {0.14231837578, -0.00512032185769, -0.147994804857}}}));
  // nn.AvgPool2d(2)(x)[0]
  EXPECT_CLOSE(nn::AvgPool2d(2)(x)[0],
               f64({{{-0.113099204285, 0.102449167613}, {-0.00414838437574, 0.164247453109}},
                    {{-0.145277877774, -0.106729708581}, {-0.164218489039, 0.00429704960554}}}));
  // nn.AdaptiveAvgPool2d((2,3))(x)[0]
  nn::AdaptiveAvgPool2d adaptive(nn::AdaptiveAvgPool2dOptions({2, 3}));
  EXPECT_CLOSE(adaptive(x)[0], f64({{{0.231233008352, 0.216760048862, 0.00906888637134},
                                     {0.270077711155, 0.0878933584407, -0.172638442812}},
                                    {{-0.0914480471963, 0.159716879944, 0.268511436282},
                                     {0.100282788507, 0.242775638937, 0.168860193956}}}));
  EXPECT_CLOSE(adaptive(x[0]), adaptive(x)[0]);  // unbatched
  for (const std::function<Tensor(const Tensor&)>& f :
       std::vector<std::function<Tensor(const Tensor&)>>{avgpool, adaptive, maxpool})
    EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); },
                                    {wave({1, 1, 5, 5}, 0.7, 0.3).requires_grad_()}));
  EXPECT_EMBER_ERROR(maxpool(randn({5, 5})), "MaxPool2d: expected 3D (unbatched) or 4D (batched) input",
                     "2D input [5, 5]");
  EXPECT_EMBER_ERROR(avgpool(randn({5})), "AvgPool2d: expected 3D");
  EXPECT_EMBER_ERROR(adaptive(randn({1, 1, 1, 5, 5})), "AdaptiveAvgPool2d: expected 3D", "5D");
}

}  // namespace
}  // namespace ember::testing
