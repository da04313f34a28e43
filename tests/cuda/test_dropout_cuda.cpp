// native_dropout on the GPU: for the same generator state the CUDA mask is the CPU one (and
// replays with the default generator) in every float dtype, through the vectorized path (aligned
// input), the element-wise one (an offset view) and a non-contiguous input; the values and the
// backward (and its own backward) agree with the CPU; p = 1 gives zeros; device errors; gelu_dropout,
// and its gradient's row sums for the linear before it.
#include <cmath>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class DropoutCuda : public CudaTest {};

constexpr ScalarType kFloatDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// native_dropout of x (on the CPU) run on the CPU and on the GPU from generators in the same
// state; checks masks equal, values within the dtype's CUDA tolerance and both generators moved
// alike. `view` makes the input layout on each device.
void expect_same_as_cpu(const Tensor& x, double p, Tensor (*view)(const Tensor&)) {
  Generator gc(2024), gg(2024);
  gc.set_state({2024, 17});
  gg.set_state({2024, 17});
  auto [out_c, mask_c] = native_dropout(view(x), p, true, &gc);
  auto [out_g, mask_g] = native_dropout(view(x.cuda()), p, true, &gg);
  ASSERT_TRUE(out_g.is_cuda());
  ASSERT_TRUE(mask_g.is_cuda());
  EXPECT_CLOSE(mask_g.cpu(), mask_c);
  EXPECT_CLOSE(out_g.cpu(), out_c, cuda_tolerance(x.dtype()));
  EXPECT_EQ(gg.get_state().offset, gc.get_state().offset);
}

Tensor same(const Tensor& t) { return t; }
// Starts one element into its buffer: not 16-byte aligned, so the element-wise path runs.
Tensor offset_by_one(const Tensor& t) {
  Tensor buf = empty({t.numel() + 1}, t.options());
  buf.slice(0, 1).copy_(t.reshape({-1}));
  return buf.slice(0, 1).view(t.sizes());
}
Tensor transposed(const Tensor& t) { return t.dim() == 2 ? t.t() : t; }

TEST_F(DropoutCuda, MaskAndValuesMatchTheCpuInEveryDtype) {
  for (ScalarType dt : kFloatDtypes)
    for (int64_t n : {1, 7, 8, 4099, (1 << 20) + 3}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " n " + std::to_string(n));
      Tensor x = random_tensor({n}, dt, -50, 50);
      expect_same_as_cpu(x, 0.3, same);
      expect_same_as_cpu(x, 0.5, offset_by_one);
    }
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(to_string(dt)) + " non-contiguous");
    Tensor x = random_tensor({123, 77}, dt);
    expect_same_as_cpu(x, 0.2, transposed);
    expect_same_as_cpu(x, 0.9, non_contiguous);
  }
}

TEST_F(DropoutCuda, MaskReplaysWithTheDefaultGenerator) {
  Tensor x = random_tensor({1000, 33}, kBFloat16).cuda();
  manual_seed(5);
  auto [first_out, first] = native_dropout(x, 0.1);
  const uint64_t offset = default_generator(kCUDA).get_state().offset;
  manual_seed(5);
  auto [out, mask] = native_dropout(x, 0.1);
  EXPECT_CLOSE(mask.cpu(), first.cpu());
  EXPECT_EQ(default_generator(kCUDA).get_state().offset, offset);
  // The kept values are x / 0.9 as the CPU computes it (float math, rounded to bf16).
  EXPECT_CLOSE(out.cpu(), where(mask.cpu(), x.cpu() * (1 / 0.9), 0), cuda_tolerance(kBFloat16));
}

TEST_F(DropoutCuda, ProbabilityOneGivesZerosAndZeroKeepsAll) {
  Tensor x = tensor({1.0, INFINITY, -INFINITY, NAN, 3.0}).cuda();
  auto [out, mask] = native_dropout(x, 1.0);
  EXPECT_CLOSE(out.cpu(), zeros({5}), Tolerance{0, 0});
  EXPECT_FALSE(mask.any().item<bool>());
  auto [same_x, all] = native_dropout(x, 0.0);
  EXPECT_CLOSE(same_x.cpu(), x.cpu(), Tolerance{0, 0});
  EXPECT_TRUE(all.all().item<bool>());
  EXPECT_EQ(std::get<0>(native_dropout(empty({0, 4}, TensorOptions(kFloat32).device(kCUDA)), 0.5)).numel(),
            0);
}

TEST_F(DropoutCuda, BackwardMatchesTheCpu) {
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor g = random_tensor({257, 9}, dt, -10, 10);
    Tensor mask = random_tensor({257, 9}, kFloat32, 0, 1).lt(0.7);
    const double scale = 1 / 0.7;
    Tensor ref = native_dropout_backward(g, mask, scale);
    EXPECT_CLOSE(native_dropout_backward(g.cuda(), mask.cuda(), scale).cpu(), ref, cuda_tolerance(dt));
    EXPECT_CLOSE(native_dropout_backward(g.cuda().t(), mask.cuda().t(), scale).cpu(), ref.t(),
                 cuda_tolerance(dt));
    EXPECT_CLOSE(native_dropout_backward(offset_by_one(g.cuda()), mask.cuda(), scale).cpu(), ref,
                 cuda_tolerance(dt));
  }
  // Dropped inf and NaN gradients give 0.
  Tensor g = tensor({INFINITY, NAN, 2.0}).cuda();
  Tensor mask = tensor({0, 0, 1}, kInt64).ne(0).cuda();
  EXPECT_CLOSE(native_dropout_backward(g, mask, 3.0).cpu(), tensor({0.0, 0.0, 6.0}), Tolerance{0, 0});
}

TEST_F(DropoutCuda, AutogradAndDoubleBackwardMatchTheCpu) {
  Tensor x = random_tensor({64, 33}, kFloat32);
  Tensor gy = random_tensor({64, 33}, kFloat32), w = random_tensor({64, 33}, kFloat32);
  auto grads_on = [&](Device d) {
    Tensor xd = x.to(d).requires_grad_(), gyd = gy.to(d).requires_grad_();
    Generator gen(8);
    Tensor out = std::get<0>(native_dropout(xd, 0.4, true, &gen));
    Tensor gx = autograd::grad({out}, {xd}, {gyd}, true, true)[0];
    Tensor ggy = autograd::grad({(gx * w.to(d)).sum()}, {gyd})[0];
    return std::pair{gx.detach().cpu(), ggy.cpu()};
  };
  auto [gx_c, ggy_c] = grads_on(kCPU);
  auto [gx_g, ggy_g] = grads_on(kCUDA);
  EXPECT_CLOSE(gx_g, gx_c, cuda_tolerance(kFloat32));
  EXPECT_CLOSE(ggy_g, ggy_c, cuda_tolerance(kFloat32));
}

// gelu_dropout: the CPU's mask, values and input gradient in every float dtype, aligned and not.
TEST_F(DropoutCuda, GeluDropoutMatchesTheCpu) {
  for (ScalarType dt : kFloatDtypes)
    for (auto view : {same, offset_by_one}) {
      SCOPED_TRACE(std::string(to_string(dt)));
      Tensor x = random_tensor({4099}, dt, -4, 4), gy = random_tensor({4099}, dt);
      Generator gc(11), gg(11);
      Tensor xc = view(x).detach().requires_grad_(), xg = view(x.cuda()).detach().requires_grad_();
      Tensor oc = gelu_dropout(xc, 0.3, true, &gc), og = gelu_dropout(xg, 0.3, true, &gg);
      EXPECT_CLOSE(og.cpu() == 0, oc == 0);
      EXPECT_CLOSE(og.cpu(), oc, cuda_tolerance(dt));
      Tensor gc_x = autograd::grad({oc}, {xc}, {gy})[0], gg_x = autograd::grad({og}, {xg}, {gy.cuda()})[0];
      EXPECT_CLOSE(gg_x.cpu(), gc_x, cuda_tolerance(dt));
    }
}

// gelu_dropout's backward sums the input gradient over rows for the node before it when that node
// asks (a linear, for its bias gradient): on either device the gradient's sums as stored, through
// the tiled kernel (rows of whole 16-byte vectors, several slices) and the fallbacks (an odd row, an
// input one element off its alignment), with the same gradient as without them.
TEST_F(DropoutCuda, GeluDropoutSumsItsGradientOverRowsForTheNodeBeforeIt) {
  struct Case {
    int64_t rows, n;
    Tensor (*view)(const Tensor&);
  };
  for (ScalarType dt : kFloatDtypes)
    for (const Case& c :
         {Case{300, 264, same}, Case{5, 3072, same}, Case{37, 13, same}, Case{37, 24, offset_by_one}}) {
      SCOPED_TRACE(::testing::Message() << to_string(dt) << " [" << c.rows << ", " << c.n << "]");
      Tensor x = random_tensor({c.rows, c.n}, dt, -4, 4), gy = random_tensor({c.rows, c.n}, dt);
      for (Device d : {Device(kCPU), Device(kCUDA)}) {
        RowSumsSeen seen;
        Generator gen(12);
        Tensor xd = c.view(x.to(d)).detach().requires_grad_();
        Tensor out = gelu_dropout(asking_for_row_sums(xd, &seen), 0.3, true, &gen);
        out.backward(gy.to(d));
        ASSERT_TRUE(seen.sums.defined()) << d;
        EXPECT_EQ(seen.sums.dtype(), dt == kFloat64 ? kFloat64 : kFloat32);
        // Summed in float32 over 300 rows: a few ulps of the largest partial sums.
        EXPECT_CLOSE(seen.sums.cpu().to(kFloat64), seen.grad.cpu().to(kFloat64).sum({0}),
                     Tolerance{1e-5, 1e-4})
            << d;
        Generator again(12);
        Tensor xp = c.view(x.to(d)).detach().requires_grad_();
        Tensor expected = autograd::grad({gelu_dropout(xp, 0.3, true, &again)}, {xp}, {gy.to(d)})[0];
        EXPECT_CLOSE(seen.grad.cpu(), expected.cpu()) << d;
      }
    }
}

TEST_F(DropoutCuda, DeviceMismatchIsAnError) {
  Tensor g = empty({2, 3}, TensorOptions(kFloat32).device(kCUDA));
  Tensor mask = ones({2, 3}, kBool);
  EXPECT_EMBER_ERROR(native_dropout_backward(g, mask, 2.0), "native_dropout_backward", "mask is on cpu",
                     "grad_output on cuda");
}

}  // namespace
}  // namespace ember::testing
