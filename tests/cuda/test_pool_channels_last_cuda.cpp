// Channels-last pooling on the GPU: an NHWC input (threads along C) gives NHWC outputs, indices
// and gradients with the CPU's values and the GPU NCHW path's values; a transposed input takes the
// contiguous path.
#include <iterator>

#include "cuda_test_util.h"
#include "pool_cases.h"

namespace ember::testing {
namespace {

class PoolChannelsLastCuda : public CudaTest {};

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

TEST_F(PoolChannelsLastCuda, ForwardMatchesCpuAndStaysChannelsLast) {
  // 3 channels, 64 (two warps of channels per cell), 37 (a warp straddling cells).
  for_each_pool_input({{2, 3, 9, 8}, {2, 64, 14, 14}, {3, 37, 7, 6}}, [](const PoolCase& c, const Tensor& x) {
    Tensor xl = x.contiguous(kCL);
    Tensor gx = xl.cuda();
    ASSERT_TRUE(is_nhwc(gx));
    Tensor got = c.fn(gx);
    ASSERT_TRUE(got.is_cuda());
    EXPECT_TRUE(is_nhwc(got));
    const Tolerance tol = c.max ? Tolerance{0, 0} : cuda_tolerance(x.dtype());
    EXPECT_TRUE(assert_close(got.cpu(), c.fn(xl), tol));
    // The GPU's NCHW kernel sums each window in the same order.
    EXPECT_TRUE(assert_close(got.cpu(), c.fn(x.cuda()).cpu(), Tolerance{0, 0}));
  });
}

TEST_F(PoolChannelsLastCuda, BackwardMatchesCpuWithChannelsLastGradients) {
  const Pool differentiable[] = {
      [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); },
      [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, true, false); },
      [](const Tensor& x) {
        return adaptive_avg_pool2d(x, {3, 4});
      },
  };
  for (ScalarType dt : {kFloat64, kFloat32}) {
    for (size_t i = 0; i < std::size(differentiable); ++i) {
      SCOPED_TRACE(::testing::Message() << "op " << i << " " << dt);
      const Pool& fn = differentiable[i];
      Tensor x = random_tensor({2, 24, 7, 9}, dt).contiguous(kCL);
      Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
      Tensor yc = fn(xc), yg = fn(xg);
      EXPECT_TRUE(is_nhwc(yg));
      Tensor gy = random_tensor(yc.sizes(), dt);
      Tensor ref = autograd::grad({yc}, {xc}, {gy})[0];
      Tensor got = autograd::grad({yg}, {xg}, {gy.cuda()})[0];
      EXPECT_TRUE(is_nhwc(ref));
      EXPECT_TRUE(is_nhwc(got));
      EXPECT_TRUE(assert_close(got.cpu(), ref, cuda_tolerance(dt)));
    }
  }
}

// The backward kernel gathers in the CPU kernel's order (bit for bit) and agrees with the
// scatter formula; 64 channels take 16-byte vectors, 37 one channel at a time.
TEST_F(PoolChannelsLastCuda, MaxPoolBackwardKernelMatchesCpuAndTheScatterFormula) {
  for (const auto& [name, fn] : kOverlappingMaxPools)
    for (ScalarType dt : {kFloat32, kBFloat16})
      for (DimVector shape : {DimVector{2, 64, 14, 14}, DimVector{3, 37, 9, 8}})
        for (bool cl : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << name << " " << dt << " " << IntArrayRef(shape) << " cl " << cl);
          Tensor x = tied_input(shape, dt);
          if (cl) x = x.contiguous(kCL);
          Tensor gy = random_tensor(fn(x).sizes(), dt);
          auto [kernel, formula] = max_pool_grads_both_ways(fn, x.cuda(), gy.cuda());
          EXPECT_EQ(is_nhwc(kernel), cl);
          EXPECT_TRUE(assert_close(kernel.cpu(), max_pool_grads_both_ways(fn, x, gy).first, Tolerance{0, 0}));
          EXPECT_TRUE(assert_close(kernel.cpu(), formula.cpu(), cuda_tolerance(dt)));
        }
}

TEST_F(PoolChannelsLastCuda, TransposedInputTakesTheContiguousPath) {
  Tensor x = random_tensor({2, 5, 6, 7}, kFloat32);
  Tensor t = x.cuda().transpose(2, 3);
  const std::pair<Tensor, Tensor> cases[] = {
      {max_pool2d(t, 2), max_pool2d(x.transpose(2, 3), 2)},
      {avg_pool2d(t, 3, 2, 1), avg_pool2d(x.transpose(2, 3), 3, 2, 1)},
      {adaptive_avg_pool2d(t, {4, 3}), adaptive_avg_pool2d(x.transpose(2, 3), {4, 3})},
  };
  for (const auto& [got, ref] : cases) {
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(assert_close(got.cpu(), ref, cuda_tolerance(kFloat32)));
  }
}

}  // namespace
}  // namespace ember::testing
