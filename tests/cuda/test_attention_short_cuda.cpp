// scaled_dot_product_attention through ember's kernel for short sequences
// (cuda/attention_short.cu): forward and backward against the float64 composite on the CPU, f16
// and bf16, causal or not, at sizes that fill the block's 128 rows and that leave part of them;
// q, k, v chunked from one projection get their gradients in one block; dropout keeps what
// short_attention_keeps defines and the backward regenerates it; a captured step replays it; what
// the kernel leaves to cuDNN.
#include <ember/core/profiler.h>
#include <ember/cuda/attention_flash.h>
#include <ember/cuda/attention_short.h>
#include <ember/cuda/graph.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

constexpr const char* kNode = "_scaled_dot_product_flash_attention";
constexpr int64_t kE = cuda::kShortAttentionHeadDim;

using AttentionShort = CudaTest;

// [B, L, 3 H E] chunked into q, k, v [B, H, L, E], as nn::MultiheadAttention's packed projection.
std::vector<Tensor> split_heads(const Tensor& x, int64_t H) {
  std::vector<Tensor> parts = x.chunk(3, -1);
  for (Tensor& p : parts) p = p.view({x.size(0), x.size(1), H, kE}).transpose(1, 2);
  return parts;
}

TEST_F(AttentionShort, ForwardAndBackwardMatchFloat64) {
  const int64_t B = 2, H = 3;
  const std::pair<int64_t, int64_t> sizes[] = {{128, 128}, {100, 77}, {1, 128}, {128, 5}, {33, 128}};
  for (ScalarType dt : {kFloat16, kBFloat16})
    for (bool causal : {false, true})
      for (auto [L, S] : sizes) {
        SCOPED_TRACE(std::string(to_string(dt)) + " L=" + std::to_string(L) + " S=" + std::to_string(S) +
                     (causal ? " causal" : ""));
        manual_seed(41);
        Tensor q = random_tensor({B, L, H, kE}, kFloat64, -1, 1),
               k = random_tensor({B, S, H, kE}, kFloat64, -1, 1),
               v = random_tensor({B, S, H, kE}, kFloat64, -1, 1), go = random_tensor({B, H, L, kE}, kFloat64);
        // The reference: float64 on the CPU, from the values the GPU sees.
        auto leaf = [&](const Tensor& t) { return t.to(dt).to(kFloat64).transpose(1, 2).requires_grad_(); };
        Tensor rq = leaf(q), rk = leaf(k), rv = leaf(v);
        Tensor ref = scaled_dot_product_attention(rq, rk, rv, {}, 0, causal);
        ref.backward(go);

        auto gpu_leaf = [&](const Tensor& t) { return t.to(dt).cuda().requires_grad_(); };
        Tensor gq = gpu_leaf(q), gk = gpu_leaf(k), gv = gpu_leaf(v);
        Tensor out = scaled_dot_product_attention(gq.transpose(1, 2), gk.transpose(1, 2), gv.transpose(1, 2),
                                                  {}, 0, causal);
        ASSERT_TRUE(out.grad_fn() && out.grad_fn()->name() == kNode);
        EXPECT_TRUE(out.transpose(1, 2).is_contiguous()) << "merging the heads is a view";
        out.backward(go.to(dt).cuda());
        const double tol = dt == kFloat16 ? 4e-3 : 2e-2;
        EXPECT_TRUE(close_to(out.detach(), ref.detach(), tol)) << "out";
        EXPECT_TRUE(close_to(gq.grad().transpose(1, 2), rq.grad(), 2 * tol)) << "dq";
        EXPECT_TRUE(close_to(gk.grad().transpose(1, 2), rk.grad(), 2 * tol)) << "dk";
        EXPECT_TRUE(close_to(gv.grad().transpose(1, 2), rv.grad(), 2 * tol)) << "dv";
      }
}

// The gradients of q, k and v chunked from one projection fill one block laid out as the
// projection, which the chunking's backward takes whole: no copy_ in the backward.
TEST_F(AttentionShort, PackedProjectionGradientIsOneBlock) {
  const int64_t B = 2, L = 128, H = 4;
  manual_seed(42);
  Tensor qkv = random_tensor({B, L, 3 * H * kE}, kFloat64, -1, 1),
         go = random_tensor({B, H, L, kE}, kFloat64);
  Tensor ref_x = qkv.to(kBFloat16).to(kFloat64).requires_grad_();
  std::vector<Tensor> r = split_heads(ref_x, H);
  scaled_dot_product_attention(r[0], r[1], r[2]).backward(go);

  Tensor x = qkv.to(kBFloat16).cuda().requires_grad_();
  std::vector<Tensor> p = split_heads(x, H);
  Tensor out = scaled_dot_product_attention(p[0], p[1], p[2]);
  ASSERT_EQ(out.grad_fn()->name(), kNode);
  // The output's gradient laid out as the output ([B, L, H, E]), as a merge of heads sends it.
  const Tensor grad_out = go.to(kBFloat16).cuda().transpose(1, 2).contiguous().transpose(1, 2);
  profiler::Profile prof(profiler::ProfileOptions{std::vector{profiler::ProfilerActivity::CPU}, true});
  out.backward(grad_out);
  prof.stop();
  const profiler::KeyAverages calls = prof.key_averages(/*group_by_input_shape=*/true);
  for (const profiler::FunctionEventAvg& e : calls.events())
    EXPECT_NE(e.key, "copy_") << calls.table("count");
  EXPECT_TRUE(close_to(x.grad(), ref_x.grad(), 4e-2));
}

// Dropout keeps exactly the weights short_attention_keeps names for the draw the op takes, about
// 1 - p of them; output and gradients equal the composite with that mask, so the backward drew
// it again; the next call drops others.
TEST_F(AttentionShort, DropoutKeepsWhatItsDefinitionSays) {
  const int64_t B = 2, H = 3, L = 100, S = 128;
  const double p = 0.3;
  const ScalarType dt = kFloat16;
  manual_seed(43);
  Tensor q = random_tensor({B, H, L, kE}, kFloat64, -1, 1).to(dt).to(kFloat64),
         k = random_tensor({B, H, S, kE}, kFloat64, -1, 1).to(dt).to(kFloat64),
         v = random_tensor({B, H, S, kE}, kFloat64, -1, 1).to(dt).to(kFloat64),
         go = random_tensor({B, H, L, kE}, kFloat64).to(dt).to(kFloat64);
  Generator& gen = default_generator(kCUDA);
  const PhiloxState before = gen.get_state();
  const PhiloxState draw_state = gen.next();  // the state the op will take
  gen.set_state(before);

  const ops::DropoutMaskDraw draw(draw_state, p);
  Tensor keep = empty({B, H, L, S}, kFloat64);
  double* kd = keep.data_ptr<double>();
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j)
        kd[(bh * L + i) * S + j] = cuda::short_attention_keeps(draw, bh, L, i, j);
  EXPECT_NEAR(keep.mean().item<double>(), 1 - p, 0.01);

  Tensor rq = q.clone().requires_grad_(), rk = k.clone().requires_grad_(), rv = v.clone().requires_grad_();
  Tensor ref = (softmax(rq.matmul(rk.mT()) / 8.0, -1) * keep / (1 - p)).matmul(rv);
  ref.backward(go);

  Tensor gq = q.to(dt).cuda().requires_grad_(), gk = k.to(dt).cuda().requires_grad_(),
         gv = v.to(dt).cuda().requires_grad_();
  Tensor out = scaled_dot_product_attention(gq, gk, gv, {}, p);
  ASSERT_EQ(out.grad_fn()->name(), kNode);
  out.backward(go.to(dt).cuda());
  EXPECT_TRUE(close_to(out.detach(), ref.detach(), 4e-3)) << "out";
  EXPECT_TRUE(close_to(gq.grad(), rq.grad(), 8e-3)) << "dq";
  EXPECT_TRUE(close_to(gk.grad(), rk.grad(), 8e-3)) << "dk";
  EXPECT_TRUE(close_to(gv.grad(), rv.grad(), 8e-3)) << "dv";
  Tensor again = scaled_dot_product_attention(gq, gk, gv, {}, p);
  EXPECT_FALSE(again.equal(out)) << "a second draw dropped the same weights";
}

// Captured with its backward into a CUDA graph, each replay draws a new mask from the generator,
// as the eager calls do: the replays equal eager calls from the same states, bit for bit.
TEST_F(AttentionShort, GraphReplaysDrawAsEagerCalls) {
  const int64_t B = 2, H = 2, L = 128;
  manual_seed(44);
  Tensor q = random_tensor({B, H, L, kE}, kBFloat16).cuda().requires_grad_(),
         k = random_tensor({B, H, L, kE}, kBFloat16).cuda(),
         v = random_tensor({B, H, L, kE}, kBFloat16).cuda(),
         go = random_tensor({B, H, L, kE}, kBFloat16).cuda();
  auto run = [&] {
    Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.2);
    return std::vector<Tensor>{out.detach(), autograd::grad({out}, {q}, {go})[0]};
  };
  Generator& gen = default_generator(kCUDA);
  run();  // warm-up: kernel attributes and allocations outside the capture
  const PhiloxState start = gen.get_state();
  std::vector<std::vector<Tensor>> eager;
  for (int i = 0; i < 2; ++i) eager.push_back(run());

  gen.set_state(start);
  cuda::CUDAGraph graph;
  std::vector<Tensor> captured;
  {
    cuda::graph capture(graph);
    captured = run();
  }
  for (int i = 0; i < 2; ++i) {
    graph.replay();
    EXPECT_TRUE(captured[0].equal(eager[i][0])) << "out, replay " << i;
    EXPECT_TRUE(captured[1].equal(eager[i][1])) << "dq, replay " << i;
  }
  EXPECT_FALSE(eager[0][0].equal(eager[1][0]));
}

// Masks, head dims other than 64, more than 128 queries or keys, float32, or the switch off: the
// kernel declines and cuDNN's (or ember's math path) runs.
TEST_F(AttentionShort, LeavesTheRestToOtherKernels) {
  manual_seed(45);
  auto t = [](IntArrayRef s, ScalarType dt = kBFloat16) {
    return random_tensor(s, dt).cuda().requires_grad_();
  };
  auto node = [](const Tensor& out) { return std::string(out.grad_fn()->name()); };
  Tensor q = t({1, 2, 64, kE});
  EXPECT_EQ(node(scaled_dot_product_attention(q, q, q)), kNode);
  EXPECT_NE(node(scaled_dot_product_attention(q, q, q, ones({64, 64}, kBool).cuda())), kNode) << "mask";
  Tensor e32 = t({1, 2, 64, 32});
  EXPECT_NE(node(scaled_dot_product_attention(e32, e32, e32)), kNode) << "head dim 32";
  Tensor long_k = t({1, 2, 129, kE});
  EXPECT_NE(node(scaled_dot_product_attention(q, long_k, long_k)), kNode) << "129 keys";
  EXPECT_NE(node(scaled_dot_product_attention(long_k, q, q)), kNode) << "129 queries";
  Tensor f32 = t({1, 2, 64, kE}, kFloat32);
  EXPECT_NE(node(scaled_dot_product_attention(f32, f32, f32)), kNode) << "float32";
  cuda::enable_flash_sdp(false);
  EXPECT_NE(node(scaled_dot_product_attention(q, q, q)), kNode) << "switched off";
  cuda::enable_flash_sdp(true);
}

}  // namespace
}  // namespace ember::testing
