// Targeted cases for the fused CUDA kernels (softmax, normalization, losses, indexing, sort,
// pooling): the sizes where a kernel changes strategy (warp or block per row, vector or scalar
// loads), -inf, NaN and ties, large offsets, many duplicate indices, and the range errors, each
// against the CPU and, where marked, PyTorch's numbers.
#include <cmath>
#include <limits>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

class FusedCuda : public CudaTest {};

std::vector<Tensor> on_cuda(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.cuda());
  return out;
}

// fn on the GPU against fn on the CPU (the CUDA suite's tolerance of the result's dtype unless
// given; exact for integers).
void expect_matches_cpu(const Fn& fn, const std::vector<Tensor>& inputs,
                        std::optional<Tolerance> tol = std::nullopt) {
  Tensor ref = fn(inputs);
  Tensor got = fn(on_cuda(inputs));
  ASSERT_TRUE(got.is_cuda());
  EXPECT_TRUE(assert_close(got.cpu(), ref, tol ? *tol : cuda_tolerance(ref.dtype())));
}

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

// A contiguous copy of t whose data starts one element past a 16-byte boundary: the kernels
// must take their scalar path.
Tensor misaligned(const Tensor& t) {
  Tensor big = empty({t.numel() + 1}, t.options());
  Tensor view = big.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

// --- softmax ---

TEST_F(FusedCuda, SoftmaxLastDimAtEveryStrategyBoundary) {
  // A warp holds rows up to 1024 elements (512 in float64), a block up to 32768 (16384).
  for (int64_t K : {1, 31, 32, 33, 512, 513, 1024, 1025, 4097, 16385, 32769}) {
    for (ScalarType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
      SCOPED_TRACE("K " + std::to_string(K) + " " + std::string(to_string(dt)));
      Tensor x = random_tensor({5, K}, dt, -8, 8);
      expect_matches_cpu([](const auto& in) { return softmax(in[0], -1); }, {x});
      expect_matches_cpu([](const auto& in) { return log_softmax(in[0], -1); }, {x});
      EXPECT_CLOSE(softmax(misaligned(x.cuda()), 1).cpu(), softmax(x, 1), cuda_tolerance(dt));
      // Rows sum to 1 (computed in float64 on the host).
      Tensor s = softmax(x.cuda(), -1).cpu().to(kFloat64).sum({1});
      EXPECT_CLOSE(s, ones({5}, kFloat64), Tolerance{0, dt == kBFloat16 ? 0.05 : 1e-2});
    }
  }
}

TEST_F(FusedCuda, SoftmaxMaskedAndFullyMaskedRows) {
  // torch.softmax / log_softmax of [[1, 2, 3, -inf], [-inf] * 4] along dim 1.
  Tensor x = tensor({{1.0, 2.0, 3.0, -kInf}, {-kInf, -kInf, -kInf, -kInf}}, kFloat32).cuda();
  EXPECT_CLOSE(
      softmax(x, 1).cpu(),
      tensor({{0.09003057330846786, 0.2447284758090973, 0.6652409434318542, 0.0}, {kNaN, kNaN, kNaN, kNaN}},
             kFloat32));
  EXPECT_CLOSE(log_softmax(x, 1).cpu(),
               tensor({{-2.4076058864593506, -1.4076058864593506, -0.40760594606399536, -kInf},
                       {kNaN, kNaN, kNaN, kNaN}},
                      kFloat32));
  // Masked entries are exactly 0 in long rows too, in the block-per-row kernel and along dim 0.
  Tensor big = random_tensor({3, 3000}, kFloat32);
  big.narrow(1, 100, 2000).fill_(-kInf);
  big[2].fill_(-kInf);
  expect_matches_cpu([](const auto& in) { return softmax(in[0], 1); }, {big});
  expect_matches_cpu([](const auto& in) { return log_softmax(in[0], 0); }, {big.t().contiguous()});
  Tensor y = softmax(big.cuda(), 1).cpu();
  EXPECT_EQ(y[0][500].item<float>(), 0.0f);
  EXPECT_TRUE(std::isnan(y[2][0].item<float>()));
}

TEST_F(FusedCuda, SoftmaxInnerDims) {
  for (DimVector shape :
       {DimVector{2, 3000, 5}, DimVector{4, 7, 300}, DimVector{1, 50000, 2}, DimVector{3, 1, 40}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    for (ScalarType dt : {kFloat32, kBFloat16}) {
      Tensor x = random_tensor(shape, dt, -6, 6);
      expect_matches_cpu([](const auto& in) { return softmax(in[0], 1); }, {x});
      expect_matches_cpu([](const auto& in) { return log_softmax(in[0], 1); }, {x});
    }
  }
}

// --- normalization ---

TEST_F(FusedCuda, LayerNormMatchesPyTorch) {
  // torch.ops.aten.native_layer_norm([[1000.5, 1001.25, 999.75, 1002.0, 1000.0]], [5], None, None, 1e-5).
  Tensor x = tensor({{1000.5, 1001.25, 999.75, 1002.0, 1000.0}}, kFloat32).cuda();
  auto [out, mean, rstd] = native_layer_norm(x, {5}, {}, {}, 1e-5);
  EXPECT_CLOSE(out.cpu(),
               tensor({{-0.2416614443063736, 0.6645136475563049, -1.1478365659713745, 1.5706887245178223,
                        -0.8457781672477722}},
                      kFloat32),
               Tolerance{1e-4, 1e-4});
  EXPECT_CLOSE(mean.cpu(), tensor({{1000.7000122070312}}, kFloat32));
  EXPECT_CLOSE(rstd.cpu(), tensor({{1.2082334756851196}}, kFloat32), Tolerance{1e-4, 0});
}

TEST_F(FusedCuda, LayerNormLargeMeanOffsetIsStable) {
  // |mean| >> std: a sum-of-squares variance would cancel; the mean first (rows in registers) and
  // Welford (longer rows) keep the float64 answer.
  for (int64_t N : {256, 777, 1024, 3000, 40000}) {
    SCOPED_TRACE("N " + std::to_string(N));
    Tensor x = (random_tensor({6, N}, kFloat64) + 1000).to(kFloat32);
    Tensor w = random_tensor({N}, kFloat32), b = random_tensor({N}, kFloat32);
    auto [out, mean, rstd] = native_layer_norm(x.cuda(), {N}, w.cuda(), b.cuda(), 1e-5);
    auto [ref, ref_mean, ref_rstd] =
        native_layer_norm(x.to(kFloat64), {N}, w.to(kFloat64), b.to(kFloat64), 1e-5);
    EXPECT_CLOSE(out.cpu(), ref.to(kFloat32), Tolerance{1e-3, 1e-3});
    EXPECT_CLOSE(mean.cpu(), ref_mean.to(kFloat32), Tolerance{1e-6, 0});
    EXPECT_CLOSE(rstd.cpu(), ref_rstd.to(kFloat32), Tolerance{1e-3, 0});
    expect_matches_cpu([N](const auto& in) { return layer_norm(in[0], {N}); }, {x.to(kBFloat16)});
  }
}

TEST_F(FusedCuda, GroupNormRowMoments) {
  Tensor x = random_tensor({3, 8, 33, 17}, kFloat32) * 3 + 50;
  expect_matches_cpu([](const auto& in) { return group_norm(in[0], 4, in[1], in[2]); },
                     {x, random_tensor({8}, kFloat32), random_tensor({8}, kFloat32)}, Tolerance{1e-3, 1e-3});
}

TEST_F(FusedCuda, BatchNormMomentsOverManyElements) {
  // N*H*W = 1M per channel (a two-stage reduction), with an offset of 100.
  Tensor x = random_tensor({64, 3, 128, 128}, kFloat32) + 100;
  auto [out, mean, invstd] = native_batch_norm(x.cuda(), {}, {}, {}, {}, true, 0.1, 1e-5);
  auto [ref, ref_mean, ref_invstd] = native_batch_norm(x.to(kFloat64), {}, {}, {}, {}, true, 0.1, 1e-5);
  EXPECT_CLOSE(mean.cpu(), ref_mean.to(kFloat32), Tolerance{1e-6, 0});
  EXPECT_CLOSE(invstd.cpu(), ref_invstd.to(kFloat32), Tolerance{1e-4, 0});
  EXPECT_CLOSE(out.cpu(), ref.to(kFloat32), Tolerance{1e-3, 1e-3});
  // One element per channel and sample ([N, C]), running stats updated in place.
  Tensor x2 = random_tensor({100000, 5}, kFloat32);
  expect_matches_cpu(
      [](const auto& in) {
        Tensor rm = in[1].clone(), rv = in[2].clone();
        Tensor y = batch_norm(in[0], rm, rv, {}, {}, true, 0.3);
        return cat({y.flatten(), rm, rv});
      },
      {x2, zeros({5}), ones({5})}, Tolerance{1e-4, 1e-4});
  // f16 with B not a multiple of the vector width (the scalar elementwise path).
  expect_matches_cpu(
      [](const auto& in) { return batch_norm(in[0], {}, {}, in[1], in[2], true); },
      {random_tensor({4, 3, 7}, kFloat16), random_tensor({3}, kFloat16), random_tensor({3}, kFloat16)});
}

// --- losses ---

TEST_F(FusedCuda, LossesAgainstCpu) {
  Tensor logits = random_tensor({64, 1000}, kFloat32, -5, 5);
  Tensor target = randint(0, 1000, {64});
  target[3].fill_(-100);
  Tensor w = random_tensor({1000}, kFloat32, 0.5, 2);
  for (double ls : {0.0, 0.1}) {
    expect_matches_cpu([ls](const auto& in) { return cross_entropy(in[0], in[1], in[2], -100, "mean", ls); },
                       {logits, target, w});
    expect_matches_cpu([ls](const auto& in) { return cross_entropy(in[0], in[1], {}, -100, "none", ls); },
                       {logits, target});
  }
  // Class dim with spatial positions (D > 1), probabilities as targets.
  Tensor x = random_tensor({2, 40, 9}, kFloat32);
  expect_matches_cpu(
      [](const auto& in) { return cross_entropy(in[0], softmax(in[1], 1), {}, -100, "none", 0.2); },
      {x, random_tensor({2, 40, 9}, kFloat32)});
  expect_matches_cpu([](const auto& in) { return nll_loss(log_softmax(in[0], 1), in[1], {}, 7, "sum"); },
                     {x, randint(0, 40, {2, 9})});
  // Every target ignored: a mean over nothing is NaN on both.
  expect_matches_cpu([](const auto& in) { return nll_loss(in[0], in[1], {}, 2); },
                     {random_tensor({3, 4}, kFloat32), full({3}, 2, kInt64)});
  // BCE: f16 input, f32 non-contiguous target, broadcast pos_weight.
  expect_matches_cpu(
      [](const auto& in) { return binary_cross_entropy_with_logits(in[0], in[1].t(), {}, "none", in[2]); },
      {random_tensor({10, 6}, kFloat16, -4, 4), random_tensor({6, 10}, kFloat32, 0, 1),
       random_tensor({6}, kFloat32, 0.5, 3)},
      Tolerance{2e-3, 2e-3});
}

TEST_F(FusedCuda, LossSumIsDeterministic) {
  Tensor x = random_tensor({3000000}, kFloat32, 0, 1).cuda();
  Tensor a = mse_loss(x, zeros({}, x.options()), "sum"), b = mse_loss(x, zeros({}, x.options()), "sum");
  EXPECT_EQ(a.item<float>(), b.item<float>());
  Tensor ref = x.cpu().to(kFloat64).square().sum();
  EXPECT_CLOSE(a.cpu().to(kFloat64), ref, Tolerance{1e-6, 0});
}

// --- indexing ---

TEST_F(FusedCuda, ScatterAddManyDuplicatesIsExactForIntegers) {
  Tensor index = randint(0, 7, {200000});
  for (ScalarType dt : {kInt64, kInt32, kUInt8, kBool, kFloat32, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    expect_matches_cpu([](const auto& in) { return scatter_add(in[0], 0, in[1], in[2]); },
                       {zeros({7}, dt), index, ones({200000}, dt)}, Tolerance{0, 0});
  }
  // Counts per bin, by hand: uint8 wraps modulo 256.
  Tensor idx = tensor({0, 1, 1, 1, 3}, kInt64).repeat({100}).cuda();
  Tensor counts = scatter_add(zeros({4}, kUInt8).cuda(), 0, idx, ones({500}, kUInt8).cuda());
  EXPECT_CLOSE(counts.cpu(), tensor({100, 300 - 256, 0, 100}, kUInt8));
  // index_add with alpha on integers.
  expect_matches_cpu([](const auto& in) { return index_add(in[0], 1, in[1], in[2], -3); },
                     {randint(0, 9, {4, 6}, kInt32), randint(0, 6, {50}), randint(0, 9, {4, 50}, kInt32)});
}

// index_add_ of whole float rows (16-byte atomics) and the element-wise kernel it falls back to:
// rows of 64 and of 6 floats, misaligned rows, alpha, and an embedding's weight gradient.
TEST_F(FusedCuda, IndexAddOfFloatRowsMatchesTheCpu) {
  const Tolerance tol{1e-5, 1e-5};
  for (int64_t D : {64, 6}) {
    SCOPED_TRACE("row of " + std::to_string(D));
    const std::vector<Tensor> in{random_tensor({50, D}, kFloat32), randint(0, 50, {3000}),
                                 random_tensor({3000, D}, kFloat32)};
    expect_matches_cpu([](const auto& t) { return index_add(t[0], 0, t[1], t[2], 0.5); }, in, tol);
    expect_matches_cpu(
        [](const auto& t) {
          Tensor self = misaligned(t[0]);
          index_add_(self, 0, t[1], misaligned(t[2]));
          return self;
        },
        in, tol);
  }
  const Tensor weight = random_tensor({1000, 64}, kFloat32), idx = randint(0, 1000, {32, 128}),
               grad = random_tensor({32, 128, 64}, kFloat32);
  const auto weight_grad = [&](Device d) {
    Tensor w = weight.to(d).clone().requires_grad_();
    (embedding(w, idx.to(d)) * grad.to(d)).sum().backward();
    return w.grad().cpu();
  };
  EXPECT_TRUE(assert_close(weight_grad(Device(kCUDA, 0)), weight_grad(kCPU), tol));
}

TEST_F(FusedCuda, ScatterLastWriteInIndexOrderWins) {
  // Many writers per destination: the one latest along dim wins, as on the CPU.
  Tensor index = randint(0, 5, {3, 4000});
  expect_matches_cpu([](const auto& in) { return scatter(in[0], 1, in[1], in[2]); },
                     {zeros({3, 5}), index, arange(12000, kFloat32).view({3, 4000})}, Tolerance{0, 0});
  // Non-contiguous self and src, dim 0, a value instead of src.
  Tensor self = random_tensor({6, 9}, kFloat64);
  expect_matches_cpu([](const auto& in) { return scatter(in[0].t(), 0, in[1], in[2].t()); },
                     {self, randint(0, 9, {30, 6}), random_tensor({6, 40}, kFloat64)}, Tolerance{0, 0});
  expect_matches_cpu([](const auto& in) { return scatter(in[0].t(), 1, in[1], 2.5); },
                     {self, randint(0, 6, {9, 20})}, Tolerance{0, 0});
  // Long lines through transposed self and src (the two-pass path).
  expect_matches_cpu(
      [](const auto& in) { return scatter(in[0].t(), 0, in[1], in[2].t()); },
      {random_tensor({4, 50}, kFloat16), randint(0, 50, {200, 4}), random_tensor({4, 300}, kFloat16)},
      Tolerance{0, 0});
  expect_matches_cpu([](const auto& in) { return one_hot(in[0], 6); }, {randint(0, 6, {4, 5})});
}

TEST_F(FusedCuda, GatherAndEmbedding) {
  Tensor x = random_tensor({5, 300, 7}, kBFloat16);
  expect_matches_cpu([](const auto& in) { return gather(in[0].transpose(0, 2), 1, in[1]); },
                     {x, randint(0, 300, {7, 1000, 5})}, Tolerance{0, 0});
  expect_matches_cpu([](const auto& in) { return index_select(in[0], 0, in[1]); },
                     {random_tensor({100, 3}, kFloat64), randint(0, 100, {500}, kInt32)}, Tolerance{0, 0});
  // Rows of 3 floats (4-byte words), 8 halves (16-byte words), rows with a stride of 2 rows.
  for (const auto& c : {std::pair{kFloat32, 3}, std::pair{kFloat16, 8}, std::pair{kFloat64, 5}}) {
    const int64_t D = c.second;
    Tensor w = random_tensor({50, 2 * D}, c.first);
    Fn fn = [D](const auto& in) { return embedding(in[0].narrow(1, 0, D), in[1]); };
    expect_matches_cpu(fn, {w, randint(0, 50, {4, 33})}, Tolerance{0, 0});
    expect_matches_cpu(fn, {w, randint(0, 50, {7}, kInt32)}, Tolerance{0, 0});
  }
}

// --- sort ---

TEST_F(FusedCuda, SortTiesNaNsAndZerosLikePyTorch) {
  // torch.sort([2, nan, -0., 1, 0, 2, -inf, 1], stable=True), ascending and descending.
  Tensor x = tensor({2.0, kNaN, -0.0, 1.0, 0.0, 2.0, -kInf, 1.0}, kFloat32);
  auto [v, i] = sort(x.cuda(), 0, false, true);
  EXPECT_CLOSE(v.cpu(), tensor({-kInf, -0.0, 0.0, 1.0, 1.0, 2.0, 2.0, kNaN}, kFloat32));
  EXPECT_CLOSE(i.cpu(), tensor({6, 2, 4, 3, 7, 0, 5, 1}, kInt64));
  EXPECT_TRUE(std::signbit(v.cpu()[1].item<float>()));  // the values keep their bits
  auto [vd, id] = sort(x.cuda(), 0, true, true);
  EXPECT_CLOSE(vd.cpu(), tensor({kNaN, 2.0, 2.0, 1.0, 1.0, -0.0, 0.0, -kInf}, kFloat32));
  EXPECT_CLOSE(id.cpu(), tensor({1, 0, 5, 3, 7, 2, 4, 6}, kInt64));
}

TEST_F(FusedCuda, SortMatchesCpuOnTiesInEveryDtype) {
  auto both = [](int64_t dim, bool descending) {
    return [dim, descending](const std::vector<Tensor>& in) {
      auto [v, i] = sort(in[0], dim, descending);
      return cat({v.to(kFloat64).flatten(), i.to(kFloat64).flatten()});
    };
  };
  for (ScalarType dt : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kBool}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    // Few distinct values: long runs of ties.
    Tensor x = randint(0, 5, {3, 3000, 4}).to(dt);
    if (is_floating_point(dt)) x.view({-1}).narrow(0, 10, 7).fill_(kNaN);
    for (int64_t dim : {1, 2, 0})
      for (bool desc : {false, true}) expect_matches_cpu(both(dim, desc), {x}, Tolerance{0, 0});
  }
  // Non-contiguous input, lines of one element, topk.
  Tensor y = random_tensor({40, 30}, kFloat32).t();
  EXPECT_CLOSE(both(1, true)({y.cuda().t().contiguous().t()}).cpu(), both(1, true)({y}), Tolerance{0, 0});
  expect_matches_cpu(both(0, false), {random_tensor({1, 9}, kFloat32)}, Tolerance{0, 0});
  expect_matches_cpu(
      [](const auto& in) {
        auto [v, i] = topk(in[0], 5, 0, false);
        return cat({v.flatten(), i.to(kFloat32).flatten()});
      },
      {y}, Tolerance{0, 0});
}

// --- pooling ---

TEST_F(FusedCuda, MaxPoolNaNLikePyTorch) {
  // torch.nn.functional.max_pool2d(p, 2, 1, 0, return_indices=True) with NaN at (0, 1) and (2, 2).
  Tensor p = tensor({{{{1.0, kNaN, 3.0}, {4.0, 5.0, 6.0}, {7.0, 8.0, kNaN}}}}, kFloat32).cuda();
  auto [v, i] = max_pool2d_with_indices(p, {2}, {1}, {0});
  EXPECT_CLOSE(v.cpu(), tensor({{{{kNaN, kNaN}, {8.0, kNaN}}}}, kFloat32));
  EXPECT_CLOSE(i.cpu(), tensor({{{{1, 1}, {7, 8}}}}, kInt64));
}

TEST_F(FusedCuda, AvgPoolCeilModeAndPaddingLikePyTorch) {
  // avg_pool2d(arange(1, 26).view(1, 1, 5, 5), 3, 2, 1, ceil_mode=True, count_include_pad=False / True).
  Tensor q = arange(1, 26, 1, kFloat32).view({1, 1, 5, 5}).cuda();
  EXPECT_CLOSE(avg_pool2d(q, {3}, {2}, {1}, true, false).cpu(),
               tensor({{{{4.0, 5.5, 7.0}, {11.5, 13.0, 14.5}, {19.0, 20.5, 22.0}}}}, kFloat32));
  EXPECT_CLOSE(avg_pool2d(q, {3}, {2}, {1}, true, true).cpu(),
               tensor({{{{1.7777777910232544, 3.6666667461395264, 3.1111111640930176},
                         {7.666666507720947, 13.0, 9.666666984558105},
                         {8.44444465637207, 13.666666984558105, 9.777777671813965}}}},
                      kFloat32));
}

TEST_F(FusedCuda, PoolingAgainstCpu) {
  Tensor x = random_tensor({2, 3, 17, 12}, kFloat32);
  x.view({-1}).narrow(0, 40, 3).fill_(kNaN);
  expect_matches_cpu(
      [](const auto& in) {
        auto [v, i] = max_pool2d_with_indices(in[0], {3, 2}, {2, 3}, {1, 1}, {2, 1}, true);
        return cat({v.flatten(), i.to(kFloat32).flatten()});
      },
      {x}, Tolerance{0, 0});
  expect_matches_cpu([](const auto& in) { return max_pool2d(in[0], {3}, {1}, {1}); },
                     {randint(-50, 50, {2, 5, 6}, kInt32)});
  expect_matches_cpu([](const auto& in) { return max_pool2d(in[0], {2}); },
                     {randint(0, 200, {1, 2, 7, 7}).to(kUInt8)});
  for (ScalarType dt : {kFloat32, kFloat16, kFloat64}) {
    Tensor y = random_tensor({2, 3, 13, 11}, dt);
    expect_matches_cpu(
        [](const auto& in) {
          return avg_pool2d(in[0], {4, 3}, {3, 2}, {2, 1}, true, false);
        },
        {y});
    expect_matches_cpu([](const auto& in) { return avg_pool2d(in[0], {2}, {2}, {1}, false, true, 5); }, {y});
    expect_matches_cpu([](const auto& in) { return adaptive_avg_pool2d(in[0], {5, 7}); }, {y});
    expect_matches_cpu([](const auto& in) { return adaptive_avg_pool2d(in[0], {20, 1}); }, {y});
  }
}

}  // namespace
}  // namespace ember::testing
