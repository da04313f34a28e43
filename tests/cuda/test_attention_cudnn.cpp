// scaled_dot_product_attention through cuDNN's fused attention (cuda/attention_cudnn.cpp):
// forward and backward against the float64 composite on the CPU, for head dims 32, 64 and 128,
// f16 and bf16, with no mask, causal, a key-padding mask and an additive mask; dropout whose
// backward regenerates the forward's mask; the output laid out so that merging heads is a view.
#include <ember/core/profiler.h>
#include <ember/cuda/attention_cudnn.h>
#include <ember/cuda/attention_flash.h>

#include <string>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

constexpr const char* kFusedNode = "_scaled_dot_product_cudnn_attention";

// ember's short-sequence kernel switched off (it would take head dim 64 up to 128 tokens): it
// has its own tests (test_attention_short_cuda.cpp).
class AttentionCudnn : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (!cuda::cudnn_sdp_available()) GTEST_SKIP() << "built without cudnn_frontend";
    cuda::enable_cudnn_sdp(true);
    flash_ = cuda::flash_sdp_enabled();
    cuda::enable_flash_sdp(false);
  }
  void TearDown() override { cuda::enable_flash_sdp(flash_); }
  bool flash_ = true;
};

struct Case {
  const char* name;
  bool causal;
  int mask;  // 0 none, 1 key padding (bool [B, 1, 1, S]), 2 additive (float [B, 1, L, S]), 3 bool [L, S]
};

// Queries, keys and values as BERT makes them: [B, L, H, E] from a linear, viewed as [B, H, L, E].
Tensor heads_view(const Tensor& t) { return t.transpose(1, 2); }

TEST_F(AttentionCudnn, ForwardAndBackwardMatchFloat64) {
  const Case cases[] = {{"no mask", false, 0},
                        {"causal", true, 0},
                        {"key padding", false, 1},
                        {"additive", false, 2},
                        {"2-D bool", false, 3}};
  const int64_t B = 2, H = 3, L = 100, S = 100;
  for (ScalarType dt : {kFloat16, kBFloat16})
    for (int64_t E : {32, 64, 128})
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(to_string(dt)) + " E=" + std::to_string(E) + " " + c.name);
        manual_seed(31);
        Tensor q = random_tensor({B, L, H, E}, kFloat64, -1, 1),
               k = random_tensor({B, S, H, E}, kFloat64, -1, 1),
               v = random_tensor({B, S, H, E}, kFloat64, -1, 1), go = random_tensor({B, H, L, E}, kFloat64);
        Tensor mask;
        if (c.mask == 1) {
          mask = ones({B, 1, 1, S}, kBool);
          mask.select(0, 1).narrow(-1, 70, 30).fill_(false);  // the second sequence is 70 long
        } else if (c.mask == 2) {
          mask = random_tensor({B, 1, L, S}, kFloat32, -3, 1);
        } else if (c.mask == 3) {
          mask = random_tensor({L, S}, kFloat64) > -1.5;  // about 1 in 8 masked
          mask.select(1, 0).fill_(true);                  // no row fully masked
        }
        // The reference: float64 on the CPU, from the values the GPU sees (rounded to dt).
        auto leaf = [&](const Tensor& t) { return heads_view(t.to(dt).to(kFloat64)).requires_grad_(); };
        Tensor rq = leaf(q), rk = leaf(k), rv = leaf(v);
        Tensor ref_mask = mask.defined() && mask.dtype() != kBool ? mask.to(kFloat64) : mask;
        Tensor ref = scaled_dot_product_attention(rq, rk, rv, ref_mask, 0, c.causal);
        ref.backward(go);

        auto gpu_leaf = [&](const Tensor& t) { return t.to(dt).cuda().requires_grad_(); };
        Tensor gq = gpu_leaf(q), gk = gpu_leaf(k), gv = gpu_leaf(v);
        Tensor out = scaled_dot_product_attention(heads_view(gq), heads_view(gk), heads_view(gv),
                                                  mask.defined() ? mask.cuda() : mask, 0, c.causal);
        ASSERT_TRUE(out.grad_fn() && out.grad_fn()->name() == kFusedNode)
            << "cuDNN declined: " << cuda::cudnn_sdp_last_rejection();
        // Laid out as q ([B, L, H, E]): merging the heads back is a view.
        EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
        out.backward(go.to(dt).cuda());
        const double tol = dt == kFloat16 ? 4e-3 : 2e-2;
        EXPECT_TRUE(close_to(out.detach(), ref.detach(), tol)) << "out";
        EXPECT_TRUE(close_to(heads_view(gq.grad()), rq.grad(), 2 * tol)) << "dq";
        EXPECT_TRUE(close_to(heads_view(gk.grad()), rk.grad(), 2 * tol)) << "dk";
        EXPECT_TRUE(close_to(heads_view(gv.grad()), rv.grad(), 2 * tol)) << "dv";
      }
}

// q, k and v chunked from one projection [B, L, 3 H E] (nn::MultiheadAttention's packed in_proj):
// cuDNN writes their gradients into one block laid out as the projection, which the chunking's
// backward takes as the projection's gradient without concatenating (no copy_ in the backward).
TEST_F(AttentionCudnn, PackedProjectionGradientIsOneBlock) {
  const int64_t B = 2, L = 64, H = 4, E = 64;
  manual_seed(33);
  Tensor qkv = random_tensor({B, L, 3 * H * E}, kFloat64, -1, 1), go = random_tensor({B, H, L, E}, kFloat64);
  auto split_heads = [&](const Tensor& x) {
    std::vector<Tensor> parts = x.chunk(3, -1);
    for (Tensor& p : parts) p = p.view({B, L, H, E}).transpose(1, 2);
    return parts;
  };
  Tensor ref_x = qkv.to(kBFloat16).to(kFloat64).requires_grad_();
  std::vector<Tensor> r = split_heads(ref_x);
  scaled_dot_product_attention(r[0], r[1], r[2]).backward(go);

  Tensor x = qkv.to(kBFloat16).cuda().requires_grad_();
  std::vector<Tensor> p = split_heads(x);
  Tensor out = scaled_dot_product_attention(p[0], p[1], p[2]);
  ASSERT_TRUE(out.grad_fn() && out.grad_fn()->name() == kFusedNode)
      << "cuDNN declined: " << cuda::cudnn_sdp_last_rejection();
  profiler::Profile prof(profiler::ProfileOptions{std::vector{profiler::ProfilerActivity::CPU}, true});
  // The output's gradient laid out as the output ([B, L, H, E]), as a merge of heads sends it.
  out.backward(go.to(kBFloat16).cuda().transpose(1, 2).contiguous().transpose(1, 2));
  prof.stop();
  const profiler::KeyAverages calls = prof.key_averages(/*group_by_input_shape=*/true);
  for (const profiler::FunctionEventAvg& e : calls.events())
    EXPECT_FALSE(e.key == "copy_" && e.input_shapes.starts_with("[2, 64, 256]")) << calls.table("count");
  EXPECT_TRUE(close_to(x.grad(), ref_x.grad(), 4e-2));
}

// Without grad the fused forward runs too (no statistics kept), and a float32 input or a head dim
// cuDNN cannot take goes to ember's own kernels, with the same results.
TEST_F(AttentionCudnn, InferenceAndDeclinedInputs) {
  manual_seed(32);
  Tensor q = random_tensor({2, 4, 33, 64}, kFloat32, -1, 1),
         k = random_tensor({2, 4, 47, 64}, kFloat32, -1, 1),
         v = random_tensor({2, 4, 47, 64}, kFloat32, -1, 1);
  Tensor ref = scaled_dot_product_attention(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64));
  Tensor fused =
      scaled_dot_product_attention(q.to(kBFloat16).cuda(), k.to(kBFloat16).cuda(), v.to(kBFloat16).cuda());
  EXPECT_TRUE(close_to(fused, ref, 2e-2));
  Tensor f32 = scaled_dot_product_attention(q.cuda().requires_grad_(), k.cuda(), v.cuda());
  EXPECT_NE(f32.grad_fn()->name(), kFusedNode);
  EXPECT_TRUE(close_to(f32.detach(), ref, 1e-3));
  Tensor odd = random_tensor({1, 2, 8, 12}, kFloat16).cuda().requires_grad_();
  Tensor out = scaled_dot_product_attention(odd, odd, odd);
  EXPECT_NE(out.grad_fn()->name(), kFusedNode) << "head dim 12 is not a multiple of 8";
}

// Dropout: with q = k = 0 every weight is 1/S, and with v the identity the output row i is the
// kept mask of row i over S (1 - p): the forward shows its mask. Drawn again from the same
// generator state with random operands, output and gradients must equal the composite with that
// mask, so the backward regenerated the forward's mask. Different draws drop different weights,
// about p of them.
TEST_F(AttentionCudnn, DropoutBackwardRegeneratesTheMask) {
  const int64_t B = 2, H = 2, S = 64;
  const double p = 0.3;
  const ScalarType dt = kFloat16;
  auto opts = TensorOptions(dt).device(kCUDA);
  Generator& gen = default_generator(kCUDA);
  manual_seed(33);
  const PhiloxState state = gen.get_state();

  Tensor zero = zeros({B, H, S, S}, opts).requires_grad_();  // requires grad: the training path
  Tensor eye_v = eye(S, std::nullopt, TensorOptions(kFloat64)).expand({B, H, S, S}).to(dt).cuda();
  Tensor shown = scaled_dot_product_attention(zero, zero, eye_v, {}, p);
  ASSERT_EQ(shown.grad_fn()->name(), kFusedNode) << cuda::cudnn_sdp_last_rejection();
  Tensor scaled = shown.detach().cpu().to(kFloat64) * (S * (1 - p));
  Tensor keep = (scaled > 0.5).to(kFloat64);
  EXPECT_TRUE(((scaled - keep).abs() < 0.05).all().item<bool>()) << "the output is not a mask over S (1 - p)";
  const double kept = keep.mean().item<double>();
  EXPECT_NEAR(kept, 1 - p, 0.03);
  Tensor again = scaled_dot_product_attention(zero, zero, eye_v, {}, p).detach().cpu().to(kFloat64);
  EXPECT_FALSE(again.equal(shown.detach().cpu().to(kFloat64))) << "a second draw dropped the same weights";

  manual_seed(34);
  Tensor q = random_tensor({B, H, S, S}, kFloat64, -1, 1).to(dt).to(kFloat64),
         k = random_tensor({B, H, S, S}, kFloat64, -1, 1).to(dt).to(kFloat64),
         v = random_tensor({B, H, S, S}, kFloat64, -1, 1).to(dt).to(kFloat64),
         go = random_tensor({B, H, S, S}, kFloat64).to(dt).to(kFloat64);
  Tensor rq = q.clone().requires_grad_(), rk = k.clone().requires_grad_(), rv = v.clone().requires_grad_();
  Tensor weights = softmax(rq.matmul(rk.mT()) / 8.0, -1) * keep / (1 - p);
  Tensor ref = weights.matmul(rv);
  ref.backward(go);

  gen.set_state(state);
  Tensor gq = q.to(dt).cuda().requires_grad_(), gk = k.to(dt).cuda().requires_grad_(),
         gv = v.to(dt).cuda().requires_grad_();
  Tensor out = scaled_dot_product_attention(gq, gk, gv, {}, p);
  out.backward(go.to(dt).cuda());
  EXPECT_TRUE(close_to(out.detach(), ref.detach(), 4e-3)) << "out";
  EXPECT_TRUE(close_to(gq.grad(), rq.grad(), 8e-3)) << "dq";
  EXPECT_TRUE(close_to(gk.grad(), rk.grad(), 8e-3)) << "dk";
  EXPECT_TRUE(close_to(gv.grad(), rv.grad(), 8e-3)) << "dv";
}

// A second derivative needs the composite: without dropout the fused node computes it so; with
// dropout it refuses, naming the op.
TEST_F(AttentionCudnn, SecondDerivative) {
  manual_seed(35);
  Tensor q = random_tensor({1, 2, 16, 32}, kFloat16).cuda().requires_grad_();
  Tensor out = scaled_dot_product_attention(q, q, q);
  ASSERT_EQ(out.grad_fn()->name(), kFusedNode);
  Tensor g = autograd::grad({out.sum()}, {q}, {}, true, true)[0];
  EXPECT_TRUE(g.requires_grad());
  Tensor dropped = scaled_dot_product_attention(q, q, q, {}, 0.2);
  EXPECT_EMBER_ERROR(autograd::grad({dropped.sum()}, {q}, {}, true, true), "scaled_dot_product_attention",
                     "second derivative");
}

}  // namespace
}  // namespace ember::testing
