// Channels-last on the GPU: moving an NHWC tensor to the device keeps its layout and moves its
// bytes with no staging copy; elementwise results (unary, binary with a bias or a scalar, where,
// dropout) are NHWC with the CPU's values; dropout draws the CPU's mask for an NHWC input; a
// Conv2d converted by Module::to(ChannelsLast) trains with NHWC outputs and gradients and keeps
// the fused optimizer step.
#include <ember/cuda/caching_allocator.h>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class MemoryFormatCuda : public CudaTest {};

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;
const std::vector<int64_t> kNhwc{60, 1, 15, 3};

Tensor values() { return linspace(-1, 1, 120).reshape({2, 3, 4, 5}); }

TEST_F(MemoryFormatCuda, ElementwiseResultsStayChannelsLast) {
  Tensor x = values().contiguous(kCL), y = values().cos();
  Tensor gx = x.cuda(), gy = y.cuda(), bias = linspace(-1, 1, 3).reshape({3, 1, 1});
  EXPECT_EQ(gx.strides().vec(), kNhwc);
  EXPECT_CLOSE(gx.cpu(), x);
  const std::pair<Tensor, Tensor> cases[] = {
      {gx.relu(), x.relu()},
      {gx + bias.cuda(), x + bias},
      {gx * 2, x * 2},
      {gx + gy, x + y},
      {gelu(gx), gelu(x)},
      {where(gx > 0, gx, gy), where(x > 0, x, y)},
      {gx.to(kBFloat16), x.to(kBFloat16)},
  };
  for (const auto& [got, ref] : cases) {
    EXPECT_EQ(got.strides().vec(), kNhwc);
    EXPECT_EQ(ref.strides().vec(), kNhwc);
    EXPECT_TRUE(assert_close(got.cpu(), ref, cuda_tolerance(ref.dtype())));
  }
  // In place on an NHWC tensor (the elementwise plan walks it as one dense run).
  Tensor inplace = gx.clone();
  inplace.mul_(gy).add_(bias.cuda());
  EXPECT_EQ(inplace.strides().vec(), kNhwc);
  EXPECT_TRUE(assert_close(inplace.cpu(), x * y + bias, cuda_tolerance(kFloat32)));
}

// Host to device and back, an NHWC tensor is one transfer of its bytes: the GPU holds nothing but
// the result at any time (a contiguous staging copy there would double the peak).
TEST_F(MemoryFormatCuda, ChannelsLastMovesAsItsBytes) {
  Tensor x = random_tensor({8, 16, 32, 32}, kFloat32).contiguous(kCL);
  cuda::synchronize();
  cuda::reset_peak_memory_stats();
  const size_t before = cuda::memory_allocated();
  Tensor g = x.cuda();
  EXPECT_EQ(cuda::max_memory_allocated() - before, g.nbytes());
  EXPECT_TRUE(g.is_contiguous(kCL));
  Tensor back = g.cpu();
  EXPECT_TRUE(back.is_contiguous(kCL));
  EXPECT_CLOSE(back, x);
  // A layout that is not dense still goes through a staging copy, to the same values.
  Tensor strided = x.slice(3, 0, 32, 2);
  EXPECT_CLOSE(strided.cuda().cpu(), strided);
  Tensor landed = empty_like(g).slice(3, 0, 32, 2);
  landed.copy_(strided);
  EXPECT_CLOSE(landed.cpu(), strided);
}

TEST_F(MemoryFormatCuda, DropoutOfChannelsLastMatchesTheCpu) {
  Tensor x = random_tensor({4, 8, 5, 7}, kFloat32).contiguous(kCL);
  Generator gc(7), gg(7);
  auto [out_c, mask_c] = native_dropout(x, 0.3, true, &gc);
  auto [out_g, mask_g] = native_dropout(x.cuda(), 0.3, true, &gg);
  EXPECT_TRUE(out_g.is_contiguous(kCL));
  EXPECT_TRUE(mask_g.is_contiguous(kCL));
  EXPECT_CLOSE(mask_g.cpu(), mask_c);
  EXPECT_TRUE(assert_close(out_g.cpu(), out_c, cuda_tolerance(kFloat32)));
}

TEST_F(MemoryFormatCuda, ChannelsLastConvTrainsWithTheFusedStep) {
  manual_seed(3);
  nn::Conv2d conv(nn::Conv2dOptions(3, 4, 3).padding(1));
  nn::Conv2d ref(nn::Conv2dOptions(3, 4, 3).padding(1));
  {
    NoGradGuard no_grad;
    ref->weight.copy_(conv->weight);
    ref->bias.copy_(conv->bias);
  }
  conv->to(Device(kCUDA));
  conv->to(kCL);
  EXPECT_TRUE(conv->weight.is_contiguous(kCL));
  optim::SGD opt(conv->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ref_opt(ref->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 2; ++step) {
    Tensor x = random_tensor({2, 3, 6, 6}, kFloat32);
    Tensor out = conv(x.contiguous(kCL).cuda());
    EXPECT_TRUE(out.is_contiguous(kCL));
    Tensor loss = (out.relu() * out).sum();
    opt.zero_grad();
    loss.backward();
    EXPECT_TRUE(conv->weight.grad().is_contiguous(kCL));
    opt.step();
    ref_opt.zero_grad();
    (ref(x).relu() * ref(x)).sum().backward();
    ref_opt.step();
  }
  // The fused step keeps its momentum buffers on the device, in the weight's layout.
  const Tensor& buf = opt.state().at(conv->weight.unsafe_impl()).buffers.at("momentum_buffer");
  EXPECT_TRUE(buf.is_cuda());
  EXPECT_TRUE(buf.is_contiguous(kCL));
  EXPECT_TRUE(assert_close(conv->weight.cpu(), ref->weight, Tolerance{1e-3, 1e-4}));
  EXPECT_TRUE(assert_close(conv->bias.cpu(), ref->bias, Tolerance{1e-3, 1e-4}));
}

}  // namespace
}  // namespace ember::testing
