// dropout_add_layer_norm on the GPU against the CPU from generators in the same state: values and
// the four gradients in every float dtype, with a float32 residual for the 2-byte ones, rows that
// are whole 16-byte vectors or not (odd lengths, an input one element off its alignment), one or
// two register slots, several rows to a block, with and without weight and bias, in eval mode, and
// rows long enough for the composite; the row sums of the input gradient for the linear before it;
// and the same values as the composite on the GPU.
#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class DropoutAddLayerNormCuda : public CudaTest {};

// Starts one element into its buffer: not 16-byte aligned, so the element-wise path runs.
Tensor offset_by_one(const Tensor& t) {
  Tensor buf = empty({t.numel() + 1}, t.options());
  buf.slice(0, 1).copy_(t.reshape({-1}));
  return buf.slice(0, 1).view(t.sizes());
}

struct Case {
  ScalarType dt, residual_dt;
  int64_t rows, n;
  bool affine, misaligned, training;
};

void expect_same_as_cpu(const Case& c) {
  SCOPED_TRACE(::testing::Message() << to_string(c.dt) << " residual " << to_string(c.residual_dt) << " ["
                                    << c.rows << ", " << c.n << "] affine " << c.affine << " misaligned "
                                    << c.misaligned << " training " << c.training);
  Tensor x = random_tensor({c.rows, c.n}, c.dt), res = random_tensor({c.rows, c.n}, c.residual_dt);
  Tensor gy = random_tensor({c.rows, c.n}, c.dt);
  Tensor w = c.affine ? random_tensor({c.n}, kFloat32, 0.5, 1.5) : Tensor();
  Tensor b = c.affine ? random_tensor({c.n}, kFloat32) : Tensor();
  auto run = [&](Device d, Generator* gen) {
    auto place = [&](const Tensor& t) {
      if (!t.defined()) return t;
      Tensor on = t.to(d);
      return (c.misaligned && t.dim() == 2 ? offset_by_one(on) : on).detach().requires_grad_();
    };
    std::vector<Tensor> in{place(x), place(res), place(w), place(b)};
    Tensor out = dropout_add_layer_norm(in[0], in[1], in[2], in[3], 0.2, 1e-5, c.training, gen);
    std::vector<Tensor> wrt{in[0], in[1]};
    if (c.affine) wrt.push_back(in[2]), wrt.push_back(in[3]);
    std::vector<Tensor> grads = autograd::grad({out}, wrt, {gy.to(d)});
    grads.insert(grads.begin(), out);
    for (Tensor& t : grads) t = t.cpu();
    return grads;
  };
  Generator gc(7), gg(7);
  std::vector<Tensor> cpu = run(kCPU, &gc), gpu = run(kCUDA, &gg);
  const char* names[] = {"out", "dx", "dresidual", "dweight", "dbias"};
  for (size_t i = 0; i < cpu.size(); ++i) {
    SCOPED_TRACE(names[i]);
    // The weight's and bias's gradients add up every row: a row's rounding, times the rows.
    Tolerance tol = cuda_tolerance(c.dt);
    if (i >= 3) tol = {tol.rtol * 4, tol.atol * static_cast<double>(c.rows)};
    EXPECT_CLOSE(gpu[i], cpu[i], tol);
  }
  EXPECT_EQ(gg.get_state().offset, gc.get_state().offset);
}

TEST_F(DropoutAddLayerNormCuda, MatchesTheCpu) {
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const bool reduced = dt == kFloat16 || dt == kBFloat16;
    for (ScalarType rdt : {dt, kFloat32}) {
      if (rdt != dt && !reduced) continue;
      // 768: rows in 16-byte vectors, four teams a block; 13: odd, rows starting inside Philox
      // blocks; 300: rows not whole vectors, a team of two warps; 1000: a team with idle threads, one
      // per block; 4000: a team of more than 384 threads (one block per SM); 6000: two register slots.
      for (int64_t n : {768, 13, 300, 1000, 4000, 6000})
        expect_same_as_cpu({dt, rdt, 37, n, true, false, true});
    }
    expect_same_as_cpu({dt, dt, 37, 768, false, false, true});
    expect_same_as_cpu({dt, dt, 37, 768, true, true, true});
    expect_same_as_cpu({dt, dt, 37, 768, true, false, false});
  }
  expect_same_as_cpu({kFloat32, kFloat32, 3, 9000, true, false, true});  // the composite's rows
}

// The backward sums the input gradient over rows for the node before it when that node asks (a
// linear, for its bias gradient): on either device the gradient's sums as stored, in the parameters'
// dtype, for rows of four teams a block, odd rows, one team a block and two register slots.
TEST_F(DropoutAddLayerNormCuda, SumsItsInputGradientOverRowsForTheNodeBeforeIt) {
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (int64_t n : {768, 13, 4000, 6000})
      for (bool affine : {true, false}) {
        SCOPED_TRACE(::testing::Message() << to_string(dt) << " n " << n << " affine " << affine);
        Tensor x = random_tensor({300, n}, dt), res = random_tensor({300, n}, dt),
               gy = random_tensor({300, n}, dt);
        Tensor w = affine ? random_tensor({n}, kFloat32, 0.5, 1.5) : Tensor();
        for (Device d : {Device(kCPU), Device(kCUDA)}) {
          RowSumsSeen seen;
          Generator gen(3);
          Tensor xd = x.to(d).requires_grad_();
          Tensor wd = affine ? w.to(d).requires_grad_() : w;
          dropout_add_layer_norm(asking_for_row_sums(xd, &seen), res.to(d), wd, Tensor(), 0.2, 1e-5, true,
                                 &gen)
              .backward(gy.to(d));
          ASSERT_TRUE(seen.sums.defined()) << d;
          if (affine) {
            EXPECT_EQ(seen.sums.dtype(), dt == kFloat64 ? kFloat64 : kFloat32) << d;
          }
          // Summed in float32 over 300 rows: a few ulps of the largest partial sums.
          EXPECT_CLOSE(seen.sums.cpu().to(kFloat64), seen.grad.cpu().to(kFloat64).sum({0}),
                       Tolerance{1e-5, 1e-4})
              << d;
        }
      }
}

// On the GPU the fused op is the composite: the same mask and, up to rounding, the same values
// and gradients.
TEST_F(DropoutAddLayerNormCuda, IsTheCompositeOnTheGpu) {
  Tensor x = random_tensor({64, 768}, kBFloat16).cuda().requires_grad_();
  Tensor res = random_tensor({64, 768}, kFloat32).cuda().requires_grad_();
  Tensor w = random_tensor({768}, kFloat32, 0.5, 1.5).cuda().requires_grad_();
  Tensor b = random_tensor({768}, kFloat32).cuda().requires_grad_();
  Generator g1(5), g2(5);
  Tensor fused = dropout_add_layer_norm(x, res, w, b, 0.1, 1e-12, true, &g1);
  Tensor composite = layer_norm(res + dropout(x, 0.1, true, &g2), {768}, w, b, 1e-12);
  EXPECT_EQ(fused.dtype(), kBFloat16);
  EXPECT_CLOSE(fused.cpu().to(kFloat32), composite.cpu(), cuda_tolerance(kBFloat16));
  Tensor gy = random_tensor({64, 768}, kFloat32).cuda();
  auto gf = autograd::grad({fused}, {x, res, w, b}, {gy.to(kBFloat16)});
  auto gc = autograd::grad({composite}, {x, res, w, b}, {gy});
  for (size_t i = 0; i < gf.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_CLOSE(gf[i].cpu().to(kFloat32), gc[i].cpu().to(kFloat32), Tolerance{3e-2, 0.5});
  }
}

}  // namespace
}  // namespace ember::testing
