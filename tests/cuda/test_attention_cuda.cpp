// scaled_dot_product_attention on CUDA's own kernels (cuda/attention_math.cu,
// cuda/attention_flash.cu) against the CPU kernel: masks, causal, dropout, broadcast and strided operands;
// the fused kernel directly and against the math path.
#include <ember/cuda/attention_cudnn.h>
#include <ember/cuda/attention_flash.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "cuda_layouts.h"

namespace ember::testing {
namespace {

constexpr ScalarType kFloatTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Turns cuDNN's attention off, so that the flash kernel and the math path are what runs, and
// restores both switches when a test ends, pass or fail (cuDNN's has its own tests:
// test_attention_cudnn.cpp).
struct FlashGuard {
  bool flash = cuda::flash_sdp_enabled(), cudnn = cuda::cudnn_sdp_enabled();
  FlashGuard() { cuda::enable_cudnn_sdp(false); }
  ~FlashGuard() {
    cuda::enable_flash_sdp(flash);
    cuda::enable_cudnn_sdp(cudnn);
  }
};

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {}, bool causal = false,
            double dropout = 0, std::optional<double> scale = std::nullopt) {
  return scaled_dot_product_attention(q, k, v, mask, dropout, causal, scale);
}

// Beyond each dtype's bound: probabilities are rounded to f16/bf16 before P V, as in PyTorch's
// math backend, where the CPU kernel keeps them in float32.
Tolerance attention_tolerance(ScalarType dt) { return scaled_tolerance(dt, is_reduced_float(dt) ? 2 : 1); }

using AttentionCuda = CudaTest;

// PyTorch 2.x: F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True) with
// q = k = [[1, 0], [0, 1], [1, 1]], v = [[1, 2], [3, 4], [5, 6]] in float64.
TEST_F(AttentionCuda, CausalMatchesPyTorch) {
  const Tensor expected =
      tensor({{{1.0, 2.0}, {2.339523098653314, 3.339523098653314}, {3.510469530453662, 4.510469530453661}}},
             kFloat64);
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor q = tensor({{{1, 0}, {0, 1}, {1, 1}}}, dt).cuda(),
           v = tensor({{{1, 2}, {3, 4}, {5, 6}}}, dt).cuda();
    EXPECT_TRUE(assert_close(sdpa(q, q, v, {}, true).cpu().to(kFloat64), expected,
                             scaled_tolerance(dt, dt == kFloat64 ? 1 : 10)));
  }
}

// Every mask kind, causal with more queries than keys, a custom scale, odd sizes.
TEST_F(AttentionCuda, MatchesCpu) {
  FlashGuard guard;
  for (bool flash : {true, false}) {
    cuda::enable_flash_sdp(flash);
    for (ScalarType dt : kFloatTypes)
      for (int64_t L : {1, 17, 70})
        for (int64_t S : {1, 17, 130})
          for (int64_t E : {5, 64}) {
            SCOPED_TRACE(std::string(to_string(dt)) + " L=" + std::to_string(L) + " S=" + std::to_string(S) +
                         " E=" + std::to_string(E) + (flash ? " flash on" : " flash off"));
            manual_seed(21);
            Tensor q = random_tensor({2, 3, L, E}, dt), k = random_tensor({2, 3, S, E}, dt),
                   v = random_tensor({2, 3, S, E}, dt);
            Tensor bmask = random_tensor({L, S}, kBool);
            Tensor fmask = random_tensor({2, 1, L, S}, is_reduced_float(dt) ? kFloat32 : dt);
            Tensor gq = q.cuda(), gk = k.cuda(), gv = v.cuda();
            const Tolerance tol = attention_tolerance(dt);
            EXPECT_TRUE(assert_close(sdpa(gq, gk, gv).cpu(), sdpa(q, k, v), tol)) << "no mask";
            EXPECT_TRUE(assert_close(sdpa(gq, gk, gv, {}, true).cpu(), sdpa(q, k, v, {}, true), tol))
                << "causal";
            EXPECT_TRUE(assert_close(sdpa(gq, gk, gv, bmask.cuda()).cpu(), sdpa(q, k, v, bmask), tol))
                << "bool mask";
            EXPECT_TRUE(assert_close(sdpa(gq, gk, gv, fmask.cuda()).cpu(), sdpa(q, k, v, fmask), tol))
                << "float mask";
            EXPECT_TRUE(assert_close(sdpa(gq, gk, gv, {}, false, 0, 0.3).cpu(),
                                     sdpa(q, k, v, {}, false, 0, 0.3), tol))
                << "scale 0.3";
          }
  }
}

// Broadcast batch dims (stride 0), a transposed head layout ([B, L, H, E] viewed as
// [B, H, L, E]) and different key and value widths.
TEST_F(AttentionCuda, BroadcastAndStridedOperands) {
  FlashGuard guard;
  for (bool flash : {true, false}) {
    cuda::enable_flash_sdp(flash);
    for (ScalarType dt : kFloatTypes) {
      SCOPED_TRACE(std::string(to_string(dt)) + (flash ? " flash on" : " flash off"));
      manual_seed(22);
      const Tolerance tol = attention_tolerance(dt);
      Tensor q = random_tensor({2, 3, 9, 64}, dt), k = random_tensor({3, 11, 64}, dt),
             v = random_tensor({1, 11, 64}, dt);
      EXPECT_TRUE(assert_close(sdpa(q.cuda(), k.cuda(), v.cuda()).cpu(), sdpa(q, k, v), tol));
      Tensor qt = random_tensor({2, 40, 4, 64}, dt), kt = random_tensor({2, 33, 4, 64}, dt),
             vt = random_tensor({2, 33, 4, 64}, dt);
      auto heads = [](const Tensor& t) { return t.transpose(1, 2); };
      EXPECT_TRUE(assert_close(sdpa(heads(qt.cuda()), heads(kt.cuda()), heads(vt.cuda()), {}, true).cpu(),
                               sdpa(heads(qt), heads(kt), heads(vt), {}, true), tol));
      Tensor vw = random_tensor({2, 3, 11, 7}, dt), kk = random_tensor({2, 3, 11, 64}, dt);
      EXPECT_TRUE(
          assert_close(sdpa(q.cuda(), kk.cuda(), on_gpu(vw, Layout::Strided)).cpu(), sdpa(q, kk, vw), tol));
    }
  }
}

// The fused kernel directly: it takes f16/bf16 with head dim 64 or 128 (else declines), and
// matches the CPU and the math path, with and without the causal limit, past several key tiles.
TEST_F(AttentionCuda, FlashKernelMatchesMathPath) {
  FlashGuard guard;
  for (ScalarType dt : {kFloat16, kBFloat16})
    for (int64_t E : {64, 128})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " E=" + std::to_string(E) + (causal ? " causal" : ""));
        manual_seed(23);
        Tensor q = random_tensor({2, 2, 150, E}, dt), k = random_tensor({2, 2, 200, E}, dt),
               v = random_tensor({2, 2, 200, E}, dt);
        Tensor gq = q.cuda(), gk = k.cuda(), gv = v.cuda();
        const double scale = 1 / std::sqrt(static_cast<double>(E));
        Tensor fused = empty({2, 2, 150, E}, TensorOptions(dt).device(kCUDA));
        cuda::enable_flash_sdp(true);
        ASSERT_TRUE(cuda::flash_attention_forward(fused, gq, gk, gv, causal, scale));
        cuda::enable_flash_sdp(false);
        Tensor math = sdpa(gq, gk, gv, {}, causal).cpu();
        const Tolerance tol = attention_tolerance(dt);
        EXPECT_TRUE(assert_close(fused.cpu(), sdpa(q, k, v, {}, causal), tol));
        EXPECT_TRUE(assert_close(fused.cpu(), math, tol));
        EXPECT_FALSE(cuda::flash_attention_forward(fused, gq, gk, gv, causal, scale)) << "switched off";
      }
  cuda::enable_flash_sdp(true);
  auto g = [](IntArrayRef s, ScalarType dt) { return zeros(s, TensorOptions(dt).device(kCUDA)); };
  Tensor out = g({1, 4, 64}, kFloat32);
  EXPECT_FALSE(cuda::flash_attention_forward(out, g({1, 4, 64}, kFloat32), g({1, 4, 64}, kFloat32),
                                             g({1, 4, 64}, kFloat32), false, 0.125))
      << "float32";
  Tensor out96 = g({1, 4, 96}, kFloat16);
  EXPECT_FALSE(cuda::flash_attention_forward(out96, g({1, 4, 96}, kFloat16), g({1, 4, 96}, kFloat16),
                                             g({1, 4, 96}, kFloat16), false, 0.1))
      << "head dim 96";
}

// Dropout draws the CPU kernel's Philox stream: the same seed drops the same weights.
TEST_F(AttentionCuda, DropoutMatchesCpu) {
  FlashGuard guard;
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(24);
    Tensor q = random_tensor({2, 3, 10, 8}, dt), k = random_tensor({2, 3, 12, 8}, dt),
           v = random_tensor({2, 3, 12, 8}, dt);
    manual_seed(99);
    Tensor ref = sdpa(q, k, v, {}, false, 0.3);
    manual_seed(99);
    Tensor got = sdpa(q.cuda(), k.cuda(), v.cuda(), {}, false, 0.3).cpu();
    EXPECT_TRUE(assert_close(got, ref, attention_tolerance(dt)));
    EXPECT_FALSE(assert_close(got, sdpa(q, k, v), attention_tolerance(dt))) << "dropout changed nothing";
  }
}

// A query whose keys are all masked gets NaN (PyTorch's math backend); no keys at all gives zeros.
TEST_F(AttentionCuda, FullyMaskedRowsAndNoKeys) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor q = random_tensor({1, 3, 4}, dt).cuda(), k = random_tensor({1, 5, 4}, dt).cuda(),
           v = random_tensor({1, 5, 4}, dt).cuda();
    Tensor mask = ones({3, 5}, kBool);
    mask.select(0, 1).fill_(false);
    Tensor out = sdpa(q, k, v, mask.cuda()).cpu();
    EXPECT_TRUE(std::isnan(out[0][1][0].item<double>()));
    EXPECT_FALSE(std::isnan(out[0][0][0].item<double>()));
    Tensor none = sdpa(q, random_tensor({1, 0, 4}, dt).cuda(), random_tensor({1, 0, 3}, dt).cuda()).cpu();
    EXPECT_CLOSE(none, zeros({1, 3, 3}, dt));
  }
}

}  // namespace
}  // namespace ember::testing
