// cross_entropy with class targets on the GPU: the fused forward (one pass over the logits in
// their dtype, only the rows' logsumexp kept) and backward against PyTorch's numbers and against
// the CPU, for every option (weight, ignore_index, label_smoothing, reduction), every float dtype,
// rows a warp handles, rows a block handles, vector and scalar loads, and class dims with
// positions after them.
#include <ember/cuda/caching_allocator.h>

#include <cmath>
#include <limits>
#include <string>

#include "cuda_layouts.h"

namespace ember::testing {
namespace {

class CrossEntropyCuda : public CudaTest {};

// Loss and input gradient of cross_entropy on `device`, copied to the host (gy: the loss's gradient).
std::pair<Tensor, Tensor> loss_and_grad(const Tensor& x, const Tensor& target, const Tensor& w,
                                        int64_t ignore, const char* reduction, double ls, const Tensor& gy,
                                        Device device) {
  Tensor xd = x.to(device).detach().requires_grad_();
  Tensor loss = cross_entropy(xd, target.to(device), w.defined() ? w.to(device) : w, ignore, reduction, ls);
  Tensor gx = autograd::grad({loss}, {xd}, {gy.to(device)})[0];
  return {loss.cpu(), gx.cpu()};
}

// PyTorch 2.15 (float64):
//   x = [[1.5, -0.25, 0.75, 2, -1], [0.5, 0.25, -2, 1, 3], [-0.5, 1.25, 0, -1.5, 2.5]]
//   l = F.cross_entropy(x, [1, -100, 4], weight=[0.5, 1, 2, 1.5, 1], label_smoothing=0.1)
//   torch.autograd.grad(l, x)
// The inputs are exact in bfloat16, so every dtype is held to PyTorch's numbers.
TEST_F(CrossEntropyCuda, WeightedSmoothedMeanMatchesPyTorch) {
  Tensor x64 = tensor(
      {{1.5, -0.25, 0.75, 2.0, -1.0}, {0.5, 0.25, -2.0, 1.0, 3.0}, {-0.5, 1.25, 0.0, -1.5, 2.5}}, kFloat64);
  Tensor w64 = tensor({0.5, 1.0, 2.0, 1.5, 1.0}, kFloat64);
  Tensor target = tensor({1, -100, 4}, kInt64);
  Tensor ref_loss = tensor(1.7804509437967977, kFloat64);
  Tensor ref_grad = tensor({{0.14602399753765416, -0.4337559643922315, 0.051338685098029184,
                             0.23399647712649418, 0.002396804630054036},
                            {0.0, 0.0, 0.0, 0.0, 0.0},
                            {0.012673513865474372, 0.09170405018468322, 0.00913869823802124,
                             -0.008498277595633548, -0.10501798469254528}},
                           kFloat64);
  for (ScalarType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    auto [loss, gx] =
        loss_and_grad(x64.to(dt), target, w64.to(dt), -100, "mean", 0.1, ones({}, TensorOptions(dt)), kCUDA);
    EXPECT_EQ(loss.dtype(), dt);
    EXPECT_EQ(gx.dtype(), dt);
    const Tolerance tol = cuda_tolerance(dt);
    EXPECT_CLOSE(loss.to(kFloat64), ref_loss, tol, false);
    EXPECT_CLOSE(gx.to(kFloat64), ref_grad, tol, false);
  }
}

// PyTorch 2.15 (float64): x [2, 3, 2] with classes on dim 1, target [[2, 0], [1, 2]],
//   l = F.cross_entropy(x, t, reduction='none', ignore_index=0, label_smoothing=0.2)
//   torch.autograd.grad(l, x, [[1, 2], [-1, 0.5]])
TEST_F(CrossEntropyCuda, PositionsAfterTheClassDimMatchPyTorch) {
  Tensor x =
      tensor({{{1.0, -2.0}, {0.5, 0.0}, {-1.0, 3.0}}, {{2.0, 0.25}, {-0.5, -1.0}, {0.75, 1.5}}}, kFloat32);
  Tensor target = tensor({{2, 0}, {1, 2}}, kInt64);
  Tensor gy = tensor({{1.0, 2.0}, {-1.0, 0.5}}, kFloat32);
  auto [loss, gx] = loss_and_grad(x, target, {}, 0, "none", 0.2, gy, kCUDA);
  EXPECT_CLOSE(loss, tensor({{2.3216235863086574, 0.0}, {2.563780863337258, 0.563780863337258}}, kFloat32),
               cuda_tolerance(kFloat32));
  EXPECT_CLOSE(gx,
               tensor({{{0.5074303263010279, 0.0}, {0.2815407612170682, 0.0}, {-0.7889710875180961, 0.0}},
                       {{-0.6640124625360221, 0.07133820440776512},
                        {0.8066888713515524, -0.0033444356757761987},
                        {-0.14267640881553023, -0.06799376873198898}}},
                      kFloat32),
               cuda_tolerance(kFloat32));
}

// Every option in every dtype against the CPU kernels: rows of 7 (scalar loads, a warp per row),
// 1000 and 1024 (vector loads, a warp), 3001 (scalar, a block) and 8192 (vector, a block), a
// [N, C, D] input and a 1-D one. About one target in five is the ignore_index.
TEST_F(CrossEntropyCuda, EveryOptionMatchesTheCpu) {
  struct Shape {
    DimVector sizes;
    int64_t ignore;
  };
  const Shape shapes[] = {{{37, 7}, 3},    {{20, 1000}, 5},  {{9, 1024}, -100}, {{6, 3001}, 0},
                          {{5, 8192}, 17}, {{3, 11, 10}, 2}, {{29}, -100},      {{4, 30522}, -100}};
  for (ScalarType dt : {kFloat32, kBFloat16, kFloat16, kFloat64})
    for (const Shape& s : shapes)
      for (bool weighted : {false, true})
        for (double ls : {0.0, 0.15})
          for (const char* reduction : {"mean", "sum", "none"}) {
            SCOPED_TRACE(::testing::PrintToString(s.sizes) + " " + std::string(to_string(dt)) +
                         (weighted ? " weighted" : "") + " ls " + std::to_string(ls) + " " + reduction);
            manual_seed(21);
            const bool one_dim = s.sizes.size() == 1;
            const int64_t C = one_dim ? s.sizes[0] : s.sizes[1];
            DimVector tshape(s.sizes);
            tshape.erase(one_dim ? 0 : 1);
            Tensor x = random_tensor(s.sizes, dt, -6, 6);
            Tensor target = randint(0, C, tshape);
            if (s.ignore >= 0 && !one_dim)
              target.view({-1}).narrow(0, 0, target.numel() / 5 + 1).fill_(s.ignore);
            if (s.ignore < 0 && !one_dim) target.view({-1})[0].fill_(s.ignore);
            Tensor w = weighted ? random_tensor({C}, dt, 0.5, 2) : Tensor();
            Tensor ref = cross_entropy(x, target, w, s.ignore, reduction, ls);
            Tensor gy = random_tensor(ref.sizes(), dt, -1, 1);
            auto [ref_loss, ref_gx] = loss_and_grad(x, target, w, s.ignore, reduction, ls, gy, kCPU);
            auto [loss, gx] = loss_and_grad(x, target, w, s.ignore, reduction, ls, gy, kCUDA);
            // Sums over up to 30522 classes and 60 positions, in a different order than the CPU's.
            Tolerance tol = cuda_tolerance(dt);
            tol = {tol.rtol * 4, tol.atol * 4};
            EXPECT_CLOSE(loss, ref_loss, tol);
            EXPECT_CLOSE(gx, ref_gx, tol);
          }
}

// A linear head over a wide odd vocabulary (1030 words, rows of 2060 bf16 bytes) and its loss: the
// logits (on the GPU) and their gradient have rows 16 bytes apart (1032 elements), cross_entropy
// reads the padded logits in place, the backward's products split their 1030-long K and M, and
// every value matches the CPU's.
TEST_F(CrossEntropyCuda, WideHeadMatchesTheCpu) {
  for (ScalarType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(5);
    Tensor x = random_tensor({64, 32}, dt, -1, 1), w = random_tensor({1030, 32}, dt, -1, 1),
           bias = random_tensor({1030}, dt, -1, 1), target = randint(0, 1030, {64});
    auto run = [&](Device d) {
      Tensor xr = x.to(d).detach().requires_grad_(), wr = w.to(d).detach().requires_grad_(),
             br = bias.to(d).detach().requires_grad_();
      Tensor logits = nn::functional::linear(xr, wr, br);
      EXPECT_EQ(logits.stride(0), d.is_cuda() ? 1032 : 1030);
      int64_t grad_stride = 0;
      logits.register_hook([&](const Tensor& g) {
        grad_stride = g.stride(0);
        return Tensor();
      });
      Tensor loss = cross_entropy(logits, target.to(d));
      loss.backward();
      EXPECT_EQ(grad_stride, 1032);
      return std::vector<Tensor>{logits.cpu(), loss.cpu(), xr.grad().cpu(), wr.grad().cpu(), br.grad().cpu()};
    };
    std::vector<Tensor> ref = run(Device(kCPU)), got = run(Device(kCUDA));
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE("logits, loss, input, weight, bias gradient #" + std::to_string(i));
      EXPECT_TRUE(assert_close(got[i], ref[i], scaled_tolerance(dt, 8)));
    }
  }
}

// The head's logits [B, S, C] viewed as [N, C]: cross_entropy's backward sums its gradient over
// the rows for the linear's bias (BackwardExtras), through the view, with the same gradient as
// without; with weights, label smoothing, an ignored row, class counts that leave a tail past the
// 16-byte vectors, logits in rows padded as a linear's output (1001 in rows of 1008), more rows
// than blocks, and BERT's vocabulary (whose sums over blocks take the wide column-sum kernel).
TEST_F(CrossEntropyCuda, SumsItsGradientOverRowsForTheLinearBeforeIt) {
  for (ScalarType dt : {kFloat32, kBFloat16})
    for (auto [C, row_stride] :
         {std::pair<int64_t, int64_t>{1001, 1008}, {1001, 0}, {256, 0}, {5, 0}, {30522, 30528}}) {
      SCOPED_TRACE(::testing::Message() << to_string(dt) << " C " << C << " rows of " << row_stride);
      manual_seed(6);
      Tensor x = random_tensor({4, 150, C}, dt, -3, 3), target = randint(0, C, {600}), w = rand({C});
      target.select(0, 7).fill_(-100);
      for (Device d : {Device(kCPU), Device(kCUDA)}) {
        auto loss_of = [&](const Tensor& logits) {
          return cross_entropy(logits.view({600, C}), target.to(d), w.to(d), -100, "mean", 0.1);
        };
        RowSumsSeen seen;
        Tensor xd = x.to(d).detach().requires_grad_();
        loss_of(asking_for_row_sums(xd, &seen, row_stride)).backward();
        ASSERT_TRUE(seen.sums.defined()) << d;
        EXPECT_EQ(seen.sums.dtype(), kFloat32);
        EXPECT_CLOSE(seen.sums.cpu().to(kFloat64), seen.grad.cpu().to(kFloat64).sum({0, 1}),
                     Tolerance{1e-5, 1e-5})
            << d;
        // The same layout: the forward's row sums, and so the gradient's bits, depend on it.
        Tensor xp =
            (row_stride > 0 ? with_row_stride(x.to(d), row_stride) : x.to(d)).detach().requires_grad_();
        EXPECT_TRUE(seen.grad.cpu().equal(autograd::grad({loss_of(xp)}, {xp})[0].cpu())) << d;
      }
    }
}

// A mean over targets that are all ignored is 0 / 0 = NaN, and its gradient 0 (as PyTorch).
TEST_F(CrossEntropyCuda, AllIgnoredGivesNanLossAndZeroGradient) {
  Tensor x = random_tensor({4, 1500}, kBFloat16);
  auto [loss, gx] =
      loss_and_grad(x, full({4}, 7, kInt64), {}, 7, "mean", 0.1, ones({}, TensorOptions(kBFloat16)), kCUDA);
  EXPECT_TRUE(std::isnan(loss.to(kFloat32).item<float>()));
  EXPECT_CLOSE(gx, zeros({4, 1500}, kBFloat16));
}

// -inf logits (masked classes) add nothing to the softmax, whether a row's threads meet them last
// (rows 0-3) or first (rows 4-7); the loss is finite without smoothing and inf with it (the uniform
// part meets the -inf logits), as on the CPU and in PyTorch. A NaN logit makes its row's loss NaN,
// also where it lies among the -inf ones.
TEST_F(CrossEntropyCuda, MaskedLogits) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (ScalarType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor x = random_tensor({8, 2048}, dt);
    x.narrow(0, 0, 4).narrow(1, 1000, 1048).fill_(-kInf);
    x.narrow(0, 4, 4).narrow(1, 0, 1048).fill_(-kInf);
    Tensor target = randint(0, 1000, {8});
    target.narrow(0, 4, 4).add_(1048);
    for (double ls : {0.0, 0.1}) {
      SCOPED_TRACE(ls);
      Tensor gy = ones({}, TensorOptions(dt));
      auto [ref_loss, ref_gx] = loss_and_grad(x, target, {}, -100, "sum", ls, gy, kCPU);
      auto [loss, gx] = loss_and_grad(x, target, {}, -100, "sum", ls, gy, kCUDA);
      EXPECT_CLOSE(gx, ref_gx, cuda_tolerance(dt));
      const float l = loss.to(kFloat32).item<float>(), ref_l = ref_loss.to(kFloat32).item<float>();
      if (ls == 0) {
        EXPECT_TRUE(std::isfinite(l));
        EXPECT_CLOSE(loss, ref_loss, cuda_tolerance(dt));
      } else {
        EXPECT_TRUE(std::isinf(l));
        EXPECT_TRUE(std::isinf(ref_l));
      }
    }
    Tensor xn = x.clone();
    xn[4][10].fill_(std::nan(""));    // among row 4's -inf logits
    xn[5][1500].fill_(std::nan(""));  // among row 5's finite ones
    Tensor losses = cross_entropy(xn.cuda(), target.cuda(), {}, -100, "none").to(kFloat32).cpu();
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(std::isnan(losses[i].item<float>()), i == 4 || i == 5) << "row " << i;
  }
}

// The forward keeps one float per row for the backward, not a float32 copy of the log-probabilities
// ([256, 32768] bf16 logits: 16 MiB; log_softmax in float32 would be 32 MiB).
TEST_F(CrossEntropyCuda, ForwardKeepsOnlyTheRowLogsumexp) {
  Tensor x = random_tensor({256, 32768}, kBFloat16).cuda().requires_grad_();
  Tensor target = randint(0, 32768, {256}).cuda();
  cuda::synchronize();
  const size_t before = cuda::memory_allocated();
  Tensor loss = cross_entropy(x, target);
  cuda::synchronize();
  const size_t kept = cuda::memory_allocated() - before;
  EXPECT_LT(kept, size_t{1} << 20) << kept << " bytes held by the graph";
  Tensor gx = autograd::grad({loss}, {x})[0];
  EXPECT_EQ(gx.dtype(), kBFloat16);
  Tensor xc = x.detach().cpu().requires_grad_();
  Tensor ref_gx = autograd::grad({cross_entropy(xc, target.cpu())}, {xc})[0];
  EXPECT_CLOSE(gx.cpu(), ref_gx, cuda_tolerance(kBFloat16));
}

}  // namespace
}  // namespace ember::testing
