// cuDNN convolutions (cuda/conv_cudnn.h) against the CPU kernels: forward and both gradients for
// padding, stride, dilation, groups and depthwise, NCHW and channels-last, every float dtype.
#include <ember/cuda/conv_cudnn.h>

#include <algorithm>
#include <string>

#include "cuda_layouts.h"

namespace ember::testing {
namespace {

constexpr ScalarType kFloatTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

struct ConvCase {
  const char* desc;
  DimVector x, w;
  DimVector stride, padding, dilation;
  int64_t groups;
  DimVector output_padding = {0, 0};  // transposed only
  bool same = false;                  // padding="same" (conv2d only)
};

const ConvCase kConvCases[] = {
    {"plain", {2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {"stride 2, padding 1", {2, 3, 9, 8}, {5, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
    {"stride (2, 1), padding (1, 0), 3x2 kernel", {1, 2, 9, 10}, {3, 2, 3, 2}, {2, 1}, {1, 0}, {1, 1}, 1},
    {"dilation 2, padding 2", {2, 3, 9, 9}, {4, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},
    {"groups 2", {2, 4, 6, 6}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
    {"depthwise", {2, 8, 5, 5}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8},
    {"1x1", {2, 5, 4, 3}, {6, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
    {"stride 3, rows left over", {2, 3, 10, 11}, {4, 3, 2, 3}, {3, 3}, {0, 1}, {1, 1}, 1},
    {"padding same (odd total)", {2, 3, 7, 8}, {4, 3, 2, 4}, {1, 1}, {0, 0}, {2, 1}, 1, {0, 0}, true},
    {"wide", {2, 32, 10, 10}, {16, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
};

const ConvCase kTransposedCases[] = {
    {"plain", {2, 4, 5, 5}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {"stride 2, padding 1, output_padding 1", {2, 4, 5, 4}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, {1, 1}},
    {"stride (2, 1), groups 2", {1, 4, 4, 5}, {4, 2, 3, 2}, {2, 1}, {0, 1}, {1, 1}, 2},
    {"dilation 2", {2, 2, 4, 4}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {2, 2}, 1},
    // output_padding >= stride (allowed as it is below the dilation): zero rows on cuDNN's side.
    {"output_padding 1, stride 1, dilation 2", {2, 3, 5, 5}, {3, 2, 3, 3}, {1, 1}, {1, 0}, {2, 2}, 1, {1, 1}},
    {"depthwise stride 2", {2, 6, 4, 4}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 6, {1, 0}},
};

Tensor run(const ConvCase& c, bool transposed, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (transposed)
    return conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
  if (c.same) return conv2d(x, w, b, c.stride, "same", c.dilation, c.groups);
  return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
}

// Output and gradients (input, weight, bias) of sum(conv(x, w, b) * g) for a fixed random g.
std::vector<Tensor> forward_backward(const ConvCase& c, bool transposed, const Tensor& x, const Tensor& w,
                                     const Tensor& b, const Tensor& g) {
  Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_(), br = b.detach().requires_grad_();
  Tensor out = run(c, transposed, xr, wr, br);
  (out * g).sum().backward();
  return {out, xr.grad(), wr.grad(), br.grad()};
}

// CUDA (inputs in `layout`) against the CPU, for one case in one dtype.
void check_case(const ConvCase& c, bool transposed, ScalarType dt, Layout layout) {
  manual_seed(11);
  Tensor x = random_tensor(c.x, dt, -1, 1), w = random_tensor(c.w, dt, -1, 1);
  const int64_t cout = transposed ? c.w[1] * c.groups : c.w[0];
  Tensor b = random_tensor({cout}, dt, -1, 1);
  Tensor ref_out = run(c, transposed, x, w, b);
  Tensor g = random_tensor(ref_out.sizes(), dt, -1, 1);
  std::vector<Tensor> ref = forward_backward(c, transposed, x, w, b, g);
  std::vector<Tensor> got =
      forward_backward(c, transposed, on_gpu(x, layout), on_gpu(w, layout), b.cuda(), on_gpu(g, layout));
  const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
  // Sums of products in [-1, 1]; f16/bf16 round each result once. The error of a sum follows
  // the size of its terms, not of its result (a weight gradient over 1568 positions may cancel
  // to near 0 while cuDNN's FFT or Winograd algorithms err by ~1e-5 of the terms' scale), so
  // atol grows with the largest reference value.
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_TRUE(got[i].defined());
    EXPECT_TRUE(got[i].is_cuda());
    Tolerance tol = scaled_tolerance(dt, 8);
    if (ref[i].numel() > 0) tol.atol *= std::max(1.0, ref[i].abs().max().item<double>());
    EXPECT_TRUE(assert_close(got[i].cpu(), ref[i], tol));
  }
  // cuDNN's NHWC kernels give channels-last outputs (float64 runs NCHW inside but keeps the format).
  if (layout == Layout::ChannelsLast && got[0].size(1) > 1) {
    EXPECT_EQ(got[0].stride(1), 1);
  }
}

class ConvCuda : public CudaTest {};

TEST_F(ConvCuda, Conv2dMatchesCpu) {
  for (const ConvCase& c : kConvCases)
    for (ScalarType dt : kFloatTypes)
      for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast}) {
        SCOPED_TRACE(std::string(c.desc) + " " + std::string(to_string(dt)) + " " + to_string(layout));
        check_case(c, false, dt, layout);
      }
}

TEST_F(ConvCuda, ConvTranspose2dMatchesCpu) {
  for (const ConvCase& c : kTransposedCases)
    for (ScalarType dt : kFloatTypes)
      for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast}) {
        SCOPED_TRACE(std::string(c.desc) + " " + std::string(to_string(dt)) + " " + to_string(layout));
        check_case(c, true, dt, layout);
      }
}

// conv1d runs as a conv2d of height 1; a strided input is copied to the kernel's format.
TEST_F(ConvCuda, Conv1dAndStridedInput) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(12);
    Tensor x = random_tensor({2, 4, 11}, dt, -1, 1), w = random_tensor({6, 2, 3}, dt, -1, 1),
           b = random_tensor({6}, dt, -1, 1);
    EXPECT_TRUE(assert_close(conv1d(on_gpu(x, Layout::Strided), w.cuda(), b.cuda(), 2, 1, 1, 2).cpu(),
                             conv1d(x, w, b, 2, 1, 1, 2), scaled_tolerance(dt, 8)));
  }
}

// By hand: a 3x3 input of 1..9 with the kernel [[1, 0], [0, -1]] gives x[i][j] - x[i+1][j+1] = -4.
TEST_F(ConvCuda, SmallConvolutionByHand) {
  for (ScalarType dt : kFloatTypes) {
    Tensor x = arange(1, 10, 1, TensorOptions(dt)).view({1, 1, 3, 3});
    Tensor w = tensor({{{{1, 0}, {0, -1}}}}, dt);
    EXPECT_CLOSE(conv2d(x.cuda(), w.cuda()).cpu(), full({1, 1, 2, 2}, -4.0, dt));
  }
}

// Empty batch and an empty input channel count: empty output, or the bias alone.
TEST_F(ConvCuda, EmptyInputs) {
  Tensor w = random_tensor({4, 3, 3, 3}, kFloat32), b = random_tensor({4}, kFloat32);
  Tensor out = conv2d(zeros({0, 3, 5, 5}).cuda(), w.cuda(), b.cuda());
  EXPECT_TRUE(out.sizes().equals({0, 4, 3, 3}));
  Tensor w0 = zeros({4, 0, 3, 3});
  EXPECT_CLOSE(conv2d(zeros({2, 0, 5, 5}).cuda(), w0.cuda(), b.cuda()).cpu(),
               b.view({1, 4, 1, 1}).expand({2, 4, 3, 3}).contiguous());
}

// The cuDNN TF32 switch (on by default, off in this suite: tests/cuda/main.cpp): on, float32
// convolutions stay close to the CPU.
TEST_F(ConvCuda, AllowTf32Switch) {
  cuda::cudnn::set_allow_tf32(true);
  manual_seed(13);
  Tensor x = randn({4, 32, 16, 16}), w = randn({32, 32, 3, 3});
  Tensor got = conv2d(x.cuda(), w.cuda(), {}, 1, 1).cpu();
  cuda::cudnn::set_allow_tf32(false);
  EXPECT_TRUE(assert_close(got, conv2d(x, w, {}, 1, 1), Tolerance{1e-2, 0.2}));
  EXPECT_TRUE(assert_close(conv2d(x.cuda(), w.cuda(), {}, 1, 1).cpu(), conv2d(x, w, {}, 1, 1),
                           Tolerance{1e-4, 1e-3}));
}

// Puts cuDNN's benchmark mode back off when a test that switches it ends.
struct BenchmarkOffAtExit {
  ~BenchmarkOffAtExit() { cuda::cudnn::set_benchmark(false); }
};
const ConvCase kResnet3x3{"resnet 3x3", {8, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1};
const ConvCase kResnetDownsample{
    "resnet 1x1 stride 2", {4, 64, 14, 14}, {128, 64, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1};

// cudnn.benchmark (off by default): measured algorithms give the CPU's results in every dtype and
// layout, forward and both gradients, and a problem keeps its algorithm (the same bits on a
// repeat call). The heuristic choice also repeats its bits.
TEST_F(ConvCuda, BenchmarkSwitchAndCachedChoices) {
  EXPECT_FALSE(cuda::cudnn::benchmark());
  BenchmarkOffAtExit restore;
  const ConvCase& resnet = kResnet3x3;
  const ConvCase& downsample = kResnetDownsample;
  for (bool bench : {true, false}) {
    cuda::cudnn::set_benchmark(bench);
    EXPECT_EQ(cuda::cudnn::benchmark(), bench);
    for (const ConvCase* c : {&kConvCases[1], &kConvCases[4], &kConvCases[9], &resnet, &downsample})
      for (ScalarType dt : kFloatTypes)
        for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast}) {
          SCOPED_TRACE(std::string(c->desc) + " " + std::string(to_string(dt)) + " " + to_string(layout) +
                       (bench ? " benchmark" : " heuristic"));
          check_case(*c, false, dt, layout);
          manual_seed(3);
          Tensor x = on_gpu(random_tensor(c->x, dt, -1, 1), layout),
                 w = on_gpu(random_tensor(c->w, dt, -1, 1), layout);
          Tensor first = run(*c, false, x, w, {}), second = run(*c, false, x, w, {});
          EXPECT_TRUE(assert_close(second.cpu(), first.cpu(), Tolerance{0, 0}));
        }
  }
}

// Which cuDNN API ran a problem's forward, data gradient and weight gradient (three calls).
struct ApiCalls {
  int64_t backend, legacy;
};

ApiCalls api_calls() { return {cuda::cudnn::detail::backend_calls(), cuda::cudnn::detail::legacy_calls()}; }

// float16, bfloat16 and float32 run through cuDNN's backend (graph) API in both formats, for
// conv2d and conv_transpose2d, heuristic and measured, with the CPU's results; float64 runs on the
// legacy API.
TEST_F(ConvCuda, BackendApiRunsFloatTypes) {
  BenchmarkOffAtExit restore;
  const ConvCase& resnet = kResnet3x3;
  const ConvCase& downsample = kResnetDownsample;
  const ConvCase upsample{
      "transposed stride 2", {2, 16, 6, 6}, {16, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, {1, 1}};
  struct Problem {
    const ConvCase* c;
    bool transposed;
  };
  for (bool bench : {false, true}) {
    cuda::cudnn::set_benchmark(bench);
    for (Problem pr : {Problem{&resnet, false}, Problem{&downsample, false}, Problem{&kConvCases[9], false},
                       Problem{&upsample, true}})
      for (ScalarType dt : kFloatTypes)
        for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast}) {
          SCOPED_TRACE(std::string(pr.c->desc) + " " + std::string(to_string(dt)) + " " + to_string(layout) +
                       (bench ? " benchmark" : " heuristic"));
          const ApiCalls before = api_calls();
          check_case(*pr.c, pr.transposed, dt, layout);
          const ApiCalls after = api_calls();
          const bool legacy = dt == kFloat64;
          EXPECT_EQ(after.backend - before.backend, legacy ? 0 : 3)
              << cuda::cudnn::detail::last_fallback_reason();
          EXPECT_EQ(after.legacy - before.legacy, legacy ? 3 : 0)
              << cuda::cudnn::detail::last_fallback_reason();
          if (legacy) {
            EXPECT_NE(cuda::cudnn::detail::last_fallback_reason().find("float64"), std::string::npos);
          }
        }
  }
}

}  // namespace
}  // namespace ember::testing
