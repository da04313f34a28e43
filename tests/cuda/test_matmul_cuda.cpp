// cuBLASLt products (cuda/matmul_cublaslt.h) against the CPU kernel: every float dtype, operands
// transposed, strided and batch-broadcast, odd and zero sizes, the TF32 switch, the epilogues.
#include <ember/core/ops/linalg.h>
#include <ember/core/profiler.h>
#include <ember/cuda/graph.h>
#include <ember/cuda/matmul_cublaslt.h>

#include <cmath>
#include <string>

#include "cuda_layouts.h"

namespace ember::testing {
namespace {

constexpr ScalarType kFloatTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Restores the TF32 switch when a test ends, pass or fail.
struct Tf32Guard {
  bool saved = cuda::matmul::allow_tf32();
  ~Tf32Guard() { cuda::matmul::set_allow_tf32(saved); }
};

using MatmulCuda = CudaTest;

// [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]] (by hand), in every float dtype.
TEST_F(MatmulCuda, SmallProductByHand) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor a = tensor({{1, 2}, {3, 4}}, dt).cuda(), b = tensor({{5, 6}, {7, 8}}, dt).cuda();
    EXPECT_CLOSE(a.mm(b).cpu(), tensor({{19, 22}, {43, 50}}, dt));
    EXPECT_CLOSE(a.mm(b.t()).cpu(), tensor({{17, 23}, {39, 53}}, dt));  // b^T = [[5, 7], [6, 8]]
  }
}

// bmm over sizes 1, 3, 17 in each of M, N, K, with each operand in every layout.
TEST_F(MatmulCuda, BmmMatchesCpuInEveryLayout) {
  const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};
  for (ScalarType dt : kFloatTypes)
    for (int64_t m : {1, 3, 17})
      for (int64_t n : {1, 17})
        for (int64_t k : {1, 3, 17})
          for (Layout la : layouts)
            for (Layout lb : layouts) {
              SCOPED_TRACE(std::string(to_string(dt)) + " M=" + std::to_string(m) +
                           " N=" + std::to_string(n) + " K=" + std::to_string(k) + " a " + to_string(la) +
                           ", b " + to_string(lb));
              manual_seed(1);
              Tensor a = random_tensor({3, m, k}, dt, -1, 1), b = random_tensor({3, k, n}, dt, -1, 1);
              Tensor got = bmm(on_gpu(a, la), on_gpu(b, lb));
              ASSERT_TRUE(got.is_cuda());
              EXPECT_TRUE(assert_close(got.cpu(), bmm(a, b), scaled_tolerance(dt, 2)));
            }
}

// A batch-broadcast operand (batch stride 0) goes to cuBLASLt as is; also expanded matrix dims.
TEST_F(MatmulCuda, BroadcastOperands) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(2);
    Tensor a = random_tensor({1, 20, 24}, dt, -1, 1), b = random_tensor({5, 24, 7}, dt, -1, 1);
    Tensor ref = bmm(a.expand({5, 20, 24}), b);
    Tolerance tol = scaled_tolerance(dt, 4);
    EXPECT_TRUE(assert_close(bmm(a.cuda().expand({5, 20, 24}), b.cuda()).cpu(), ref, tol));
    // Both broadcast, one transposed.
    Tensor bt = random_tensor({1, 7, 24}, dt, -1, 1);
    EXPECT_TRUE(assert_close(bmm(a.cuda().expand({4, 20, 24}), bt.cuda().mT().expand({4, 24, 7})).cpu(),
                             bmm(a.expand({4, 20, 24}), bt.mT().expand({4, 24, 7})), tol));
    // Expanded rows and columns (stride 0 inside a matrix): copied first.
    Tensor row = random_tensor({1, 24}, dt, -1, 1), col = random_tensor({24, 1}, dt, -1, 1);
    EXPECT_TRUE(assert_close(mm(row.cuda().expand({30, 24}), col.cuda().expand({24, 9})).cpu(),
                             mm(row.expand({30, 24}), col.expand({24, 9})), tol));
    // matmul's broadcast batch path: [2, 1, 4, 3] @ [3, 3, 5].
    Tensor x = random_tensor({2, 1, 4, 3}, dt, -1, 1), y = random_tensor({3, 3, 5}, dt, -1, 1);
    EXPECT_TRUE(assert_close(matmul(x.cuda(), y.cuda()).cpu(), matmul(x, y), tol));
  }
}

// beta and alpha reach cuBLASLt: addmm and baddbmm, with beta = 0 ignoring a NaN input.
TEST_F(MatmulCuda, AddmmAndBaddbmmScale) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(3);
    Tensor in = random_tensor({23, 1}, dt, -1, 1), a = random_tensor({23, 30}, dt, -1, 1),
           b = random_tensor({30, 19}, dt, -1, 1);
    Tolerance tol = scaled_tolerance(dt, 4);
    EXPECT_TRUE(
        assert_close(addmm(in.cuda(), a.cuda(), b.cuda(), 0.5, 2).cpu(), addmm(in, a, b, 0.5, 2), tol));
    Tensor bin = random_tensor({3, 22, 20}, dt, -1, 1), ba = random_tensor({3, 22, 21}, dt, -1, 1),
           bb = random_tensor({3, 21, 20}, dt, -1, 1);
    EXPECT_TRUE(assert_close(baddbmm(bin.cuda(), ba.cuda(), bb.cuda().mT().contiguous().mT(), -1, 0.5).cpu(),
                             baddbmm(bin, ba, bb, -1, 0.5), tol));
    Tensor nan_in = full({23, 19}, std::nan(""), dt);
    Tensor got = addmm(nan_in.cuda(), a.cuda(), b.cuda(), 0, 1).cpu();
    EXPECT_TRUE(assert_close(got, mm(a, b), tol));
  }
}

// addmm with a bias row and beta = alpha = 1 (nn.Linear) runs fused, with its own backward.
TEST_F(MatmulCuda, FusedAddmmBiasAndItsGradients) {
  for (ScalarType dt : kFloatTypes)
    for (bool row2d : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (row2d ? " bias [1, N]" : " bias [N]"));
      manual_seed(6);
      Tensor a = random_tensor({7, 20}, dt, -1, 1), b = random_tensor({20, 9}, dt, -1, 1),
             bias = random_tensor(row2d ? DimVector{1, 9} : DimVector{9}, dt, -1, 1),
             g = random_tensor({7, 9}, dt, -1, 1);
      auto run = [&](Device d) {
        Tensor ar = a.to(d).detach().requires_grad_(), br = b.to(d).detach().requires_grad_(),
               cr = bias.to(d).detach().requires_grad_();
        Tensor out = addmm(cr, ar, br);
        (out * g.to(d)).sum().backward();
        return std::vector<Tensor>{out.cpu(), cr.grad().cpu(), ar.grad().cpu(), br.grad().cpu()};
      };
      std::vector<Tensor> ref = run(Device(kCPU)), got = run(Device(kCUDA));
      for (size_t i = 0; i < ref.size(); ++i) {
        SCOPED_TRACE("output, bias, mat1, mat2 gradient #" + std::to_string(i));
        EXPECT_TRUE(assert_close(got[i], ref[i], scaled_tolerance(dt, 4)));
      }
      Tensor plain = addmm(bias.cuda(), a.cuda(), b.cuda());
      EXPECT_TRUE(plain.sizes().equals({7, 9}));
      EXPECT_FALSE(plain.requires_grad());
    }
}

// A linear's backward (weight.t() in the product): the weight and bias gradients from one
// product; with 16-byte aligned rows its epilogue sums the bias gradient (cuBLASLt's BGRADB, no
// reduction kernel), else a reduction does. Against the CPU in every dtype; the stub itself with a
// transposed a and an empty product.
TEST_F(MatmulCuda, LinearWeightAndBiasGradientsFromOneProduct) {
  struct Shape {
    int64_t tokens, in, out;
    bool aligned;
  };
  for (const Shape& sh : {Shape{37, 24, 19, false}, Shape{64, 32, 16, true}})
    for (ScalarType dt : kFloatTypes) {
      SCOPED_TRACE(std::string(to_string(dt)) + (sh.aligned ? " aligned" : " unaligned"));
      manual_seed(7);
      Tensor x = random_tensor({sh.tokens, sh.in}, dt, -1, 1), w = random_tensor({sh.out, sh.in}, dt, -1, 1),
             bias = random_tensor({sh.out}, dt, -1, 1), g = random_tensor({sh.tokens, sh.out}, dt, -1, 1);
      auto run = [&](Device d) {
        Tensor xr = x.to(d).detach().requires_grad_(), wr = w.to(d).detach().requires_grad_(),
               br = bias.to(d).detach().requires_grad_();
        Tensor out = addmm(br, xr, wr.t());
        Tensor loss = (out * g.to(d)).sum();
        profiler::Profile prof(std::vector{profiler::ProfilerActivity::CPU});
        loss.backward();
        prof.stop();
        if (d.is_cuda()) {
          const profiler::KeyAverages calls = prof.key_averages();
          EXPECT_NE(calls.find("mm_row_sums"), nullptr) << calls.table("count");
          if (sh.aligned && is_reduced_float(dt)) {
            EXPECT_EQ(calls.find("reduce"), nullptr) << calls.table("count");
          }
        }
        EXPECT_TRUE(wr.grad().is_contiguous());
        return std::vector<Tensor>{out.cpu(), br.grad().cpu(), xr.grad().cpu(), wr.grad().cpu()};
      };
      std::vector<Tensor> ref = run(Device(kCPU)), got = run(Device(kCUDA));
      for (size_t i = 0; i < ref.size(); ++i) {
        SCOPED_TRACE("output, bias, input, weight gradient #" + std::to_string(i));
        EXPECT_TRUE(assert_close(got[i], ref[i], scaled_tolerance(dt, 4)));
      }
    }
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor a = random_tensor({30, 45}, dt, -1, 1), b = random_tensor({45, 6}, dt, -1, 1);
    Tensor out = empty({45, 45}, TensorOptions(dt).device(kCUDA)), sums = empty({45}, out.options());
    mm_row_sums_stub(kCUDA)(out, sums, a.cuda().t(), a.cuda());
    EXPECT_TRUE(assert_close(out.cpu(), mm(a.t(), a), scaled_tolerance(dt, 4)));
    EXPECT_TRUE(assert_close(sums.cpu(), a.sum({0}), scaled_tolerance(dt, 4)));
    Tensor none = empty({45, 0}, out.options());
    sums.zero_();
    mm_row_sums_stub(kCUDA)(none, sums, a.cuda().t(), b.cuda().narrow(1, 0, 0).narrow(0, 0, 30));
    EXPECT_TRUE(assert_close(sums.cpu(), a.sum({0}), scaled_tolerance(dt, 4)));
  }
}

// A linear of a 3D input that also feeds a later op (a residual branch, whose backward runs
// first): the linear's product adds its input gradient into the branch's (beta 1), with no add
// kernel, and the sum matches the CPU's in every dtype.
TEST_F(MatmulCuda, ALinearsProductAddsItsInputGradientIntoTheResidualBranchs) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(8);
    Tensor x = random_tensor({3, 5, 16}, dt, -1, 1), w = random_tensor({24, 16}, dt, -1, 1),
           bias = random_tensor({24}, dt, -1, 1), g = random_tensor({3, 5, 24}, dt, -1, 1),
           c = random_tensor({3, 5, 16}, dt, -1, 1);
    auto run = [&](Device d) {
      Tensor xr = x.to(d).detach().requires_grad_(), wr = w.to(d).detach().requires_grad_(),
             br = bias.to(d).detach().requires_grad_();
      Tensor h = xr * 1;  // not a leaf: its node gathers both branches' gradients
      Tensor linear = nn::functional::linear(h, wr, br);  // made first: its backward runs last
      Tensor loss = (linear * g.to(d)).sum() + (h * c.to(d)).sum();
      profiler::Profile prof(std::vector{profiler::ProfilerActivity::CPU});
      loss.backward();
      prof.stop();
      if (d.is_cuda()) {
        EXPECT_EQ(prof.key_averages().find("add"), nullptr) << prof.key_averages().table("count");
      }
      return std::vector<Tensor>{xr.grad().cpu(), wr.grad().cpu(), br.grad().cpu()};
    };
    std::vector<Tensor> ref = run(Device(kCPU)), got = run(Device(kCUDA));
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE("input, weight, bias gradient #" + std::to_string(i));
      EXPECT_TRUE(assert_close(got[i], ref[i], scaled_tolerance(dt, 4)));
    }
  }
}

// cuda::tunable: each new problem times the heuristic's candidates once and runs the fastest, which
// gives the same product (up to rounding) with or without an epilogue; beta != 0 and a capture run
// the first pick untimed, and an eager call after the capture tunes the problem.
TEST_F(MatmulCuda, TunableTimesEachProblemOnceAndGivesTheSameProducts) {
  manual_seed(12);
  cuda::tunable::enable(true);
  struct Off {
    ~Off() { cuda::tunable::enable(false); }
  } off;
  const int64_t before = cuda::tunable::tuned_problems();
  auto tuned = [&] { return cuda::tunable::tuned_problems() - before; };
  // Shapes no other test uses, so that the plan cache has none of them.
  Tensor a = random_tensor({1, 200, 72}, kBFloat16, -1, 1), b = random_tensor({1, 72, 56}, kBFloat16, -1, 1),
         bias = random_tensor({56}, kBFloat16, -1, 1), c = random_tensor({1, 200, 56}, kBFloat16, -1, 1);
  const Tensor ref = bmm(a.to(kFloat64), b.to(kFloat64));
  const Tolerance tol = scaled_tolerance(kBFloat16, 4);
  Tensor ga = a.cuda(), gb = b.cuda(), out = empty({1, 200, 56}, TensorOptions(kBFloat16).device(kCUDA));
  cuda::gemm(out, ga, gb);
  EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref, tol));
  EXPECT_EQ(tuned(), 1);
  // The epilogues are tuned where cuBLASLt has them for the layout (else the plain product runs,
  // known by now, and ember's epilogue).
  cuda::gemm(out, ga, gb, 1, 0, cuda::Epilogue::Bias, bias.cuda());
  EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref + bias.to(kFloat64), tol));
  Tensor sums = empty({200}, out.options());
  cuda::gemm(out, ga, gb, 1, 0, cuda::Epilogue::RowSumsOfA, sums);
  EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref, tol));
  EXPECT_TRUE(assert_close(sums.cpu().to(kFloat64), a.to(kFloat64).sum({2}).squeeze(0), tol));
  const int64_t known = tuned();
  EXPECT_GE(known, 1);
  EXPECT_LE(known, 3);
  cuda::gemm(out, ga, gb);  // known: not timed again
  Tensor acc = c.cuda();
  cuda::gemm(acc, ga, gb, 1, 0.5);  // beta != 0: not timed
  EXPECT_TRUE(assert_close(acc.cpu().to(kFloat64), ref + c.to(kFloat64) * 0.5, tol));
  EXPECT_EQ(tuned(), known);

  Tensor a2 = random_tensor({1, 136, 72}, kBFloat16, -1, 1).cuda();
  Tensor captured = empty({1, 136, 56}, out.options());
  cuda::CUDAGraph graph;
  {
    cuda::graph capture(graph);
    cuda::gemm(captured, a2, gb);
  }
  graph.replay();
  EXPECT_TRUE(assert_close(captured.cpu().to(kFloat64), bmm(a2.cpu().to(kFloat64), b.to(kFloat64)), tol));
  EXPECT_EQ(tuned(), known);
  cuda::gemm(captured, a2, gb);
  EXPECT_EQ(tuned(), known + 1);
}

// Zero-size products: nothing to compute, or (K = 0) an empty sum.
TEST_F(MatmulCuda, ZeroSizes) {
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    auto z = [&](IntArrayRef s) { return zeros(s, TensorOptions(dt).device(kCUDA)); };
    EXPECT_TRUE(bmm(z({0, 4, 3}), z({0, 3, 5})).sizes().equals({0, 4, 5}));
    EXPECT_TRUE(bmm(z({2, 0, 3}), z({2, 3, 5})).sizes().equals({2, 0, 5}));
    EXPECT_CLOSE(bmm(z({2, 4, 0}), z({2, 0, 5})).cpu(), zeros({2, 4, 5}, dt));
    Tensor in = full({4, 5}, 3.0, dt);
    EXPECT_CLOSE(addmm(in.cuda(), z({4, 0}), z({0, 5}), 0.5, 2).cpu(), full({4, 5}, 1.5, dt));
  }
}

// Integer products are not implemented on CUDA, as in PyTorch.
TEST_F(MatmulCuda, IntegerMatmulThrows) {
  Tensor a = ones({2, 3}, kInt64).cuda(), b = ones({3, 2}, kInt64).cuda();
  EXPECT_EMBER_ERROR(a.mm(b), "bmm", "not implemented for 'Long'");
  EXPECT_EMBER_ERROR(ones({2, 3}, kInt32).cuda().matmul(ones({3}, kInt32).cuda()),
                     "not implemented for 'Int'");
}

// TF32 (off by default): on, a 512 x 512 product moves measurably off the float32 one and stays
// close to it; off again, it is back to float32 accuracy.
TEST_F(MatmulCuda, AllowTf32Switch) {
  Tf32Guard guard;
  EXPECT_FALSE(cuda::matmul::allow_tf32());
  manual_seed(4);
  Tensor a = randn({512, 512}), b = randn({512, 512});
  Tensor ref = a.to(kFloat64).mm(b.to(kFloat64)).to(kFloat32);
  Tensor ga = a.cuda(), gb = b.cuda();
  Tensor f32 = ga.mm(gb).cpu();
  EXPECT_TRUE(assert_close(f32, ref, Tolerance{1e-5, 2e-4}));
  cuda::matmul::set_allow_tf32(true);
  EXPECT_TRUE(cuda::matmul::allow_tf32());
  Tensor tf32 = ga.mm(gb).cpu();
  // TF32 keeps 10 mantissa bits: each product is off by ~1e-3 relative, sums of 512 by ~1e-2.
  EXPECT_GT((tf32 - f32).abs().max().item<double>(), 1e-3);
  EXPECT_TRUE(assert_close(tf32, ref, Tolerance{1e-2, 0.2}));
  cuda::matmul::set_allow_tf32(false);
  EXPECT_TRUE(assert_close(ga.mm(gb).cpu(), ref, Tolerance{1e-5, 2e-4}));
}

// The internal GEMM: an f16/bf16 product kept in float32, a column-major output, and the
// bias / GELU epilogues, against the same math with ember ops on the CPU.
TEST_F(MatmulCuda, GemmOutputsAndEpilogues) {
  manual_seed(5);
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor a = random_tensor({2, 9, 40}, dt, -1, 1), b = random_tensor({2, 40, 11}, dt, -1, 1);
    Tensor out = empty({2, 9, 11}, TensorOptions(kFloat32).device(kCUDA));
    cuda::gemm(out, a.cuda(), b.cuda());
    EXPECT_TRUE(assert_close(out.cpu(), bmm(a.to(kFloat32), b.to(kFloat32)), cuda_tolerance(kFloat32)));
  }
  for (ScalarType dt : kFloatTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor a = random_tensor({3, 17, 33}, dt, -1, 1), b = random_tensor({3, 33, 13}, dt, -1, 1),
           bias = random_tensor({13}, dt, -1, 1);
    Tensor ref = bmm(a, b);
    Tolerance tol = scaled_tolerance(dt, 4);
    // Column-major output: out^T stored contiguous.
    Tensor colmajor = empty({3, 13, 17}, TensorOptions(dt).device(kCUDA)).mT();
    cuda::gemm(colmajor, a.cuda(), b.cuda(), 2.0);
    EXPECT_TRUE(assert_close(colmajor.cpu(), ref * 2, tol));
    Tensor out = empty({3, 17, 13}, TensorOptions(dt).device(kCUDA));
    cuda::gemm(out, a.cuda(), b.cuda(), 1, 0, cuda::Epilogue::Bias, bias.cuda());
    EXPECT_TRUE(assert_close(out.cpu(), ref + bias, tol));
    cuda::gemm(out, a.cuda(), b.cuda(), 1, 0, cuda::Epilogue::GeluBias, bias.cuda());
    EXPECT_TRUE(assert_close(out.cpu(), gelu((ref.to(kFloat64) + bias.to(kFloat64)), "tanh").to(dt), tol));
    // The epilogue into a column-major output goes through a row-major stand-in.
    cuda::gemm(colmajor, a.cuda(), b.cuda(), 1, 0, cuda::Epilogue::Bias, bias.cuda());
    EXPECT_TRUE(assert_close(colmajor.cpu(), ref + bias, tol));
  }
}

// A K and an M of 1030, not a multiple of 16 bytes' worth of elements: each runs as an aligned
// product and a remainder (K's with beta 1), with alpha and beta, the bias epilogue and the row sums.
TEST_F(MatmulCuda, GemmSplitsUnalignedKAndM) {
  manual_seed(8);
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor a = random_tensor({1, 1030, 1030}, dt, -1, 1), b = random_tensor({1, 1030, 24}, dt, -1, 1),
           bias = random_tensor({24}, dt, -1, 1), c = random_tensor({1, 1030, 24}, dt, -1, 1);
    const Tensor ref = bmm(a.to(kFloat64), b.to(kFloat64));
    const Tolerance tol = scaled_tolerance(dt, 8);
    Tensor out = c.cuda();
    cuda::gemm(out, a.cuda(), b.cuda(), 2.0, 0.5);
    EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref * 2 + c.to(kFloat64) * 0.5, tol));
    cuda::gemm(out, a.cuda(), b.cuda(), 1, 0, cuda::Epilogue::Bias, bias.cuda());
    EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref + bias.to(kFloat64), tol));
    Tensor sums = empty({1030}, out.options());
    cuda::gemm(out, a.cuda(), b.cuda(), 1, 0, cuda::Epilogue::RowSumsOfA, sums);
    EXPECT_TRUE(assert_close(out.cpu().to(kFloat64), ref, tol));
    EXPECT_TRUE(assert_close(sums.cpu().to(kFloat64), a.to(kFloat64).sum({2}).squeeze(0), tol));
  }
}

TEST_F(MatmulCuda, GemmChecksItsOperands) {
  auto g = [](IntArrayRef s, ScalarType dt = kFloat32) { return zeros(s, TensorOptions(dt).device(kCUDA)); };
  EXPECT_EMBER_ERROR(cuda::gemm(g({2, 3, 4}), g({2, 3, 5}), g({2, 6, 4})), "gemm: expected out [B, M, N]");
  EXPECT_EMBER_ERROR(cuda::gemm(g({2, 3, 4}, kFloat16), g({2, 3, 5}), g({2, 5, 4})),
                     "gemm: expected a and b");
  EXPECT_EMBER_ERROR(cuda::gemm(g({2, 3, 4}), g({2, 3, 5}), g({2, 5, 4}), 1, 0, cuda::Epilogue::Bias, g({3})),
                     "gemm: expected a bias [4]");
  EXPECT_EMBER_ERROR(cuda::gemm(g({1, 3, 4}), zeros({1, 3, 5}), g({1, 5, 4})), "gemm: expected CUDA tensors");
}

}  // namespace
}  // namespace ember::testing
