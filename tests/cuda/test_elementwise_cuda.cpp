// The CUDA elementwise launcher, copies, fills, random draws, reductions and scans, against the
// CPU kernels (which the CPU suite checks against independent numbers) and against hand-computed
// values. Every test is skipped on a machine without a GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <ember/core/copy.h>
#include <ember/cuda/stream.h>

#include "cuda_test_util.h"
#include "host_gate.h"

namespace ember::testing {
namespace {

class CudaKernels : public CudaTest {};

const Device kGpu(kCUDA);
const ScalarType kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};
const ScalarType kAll[] = {kBool, kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// The same numbers bit for bit (as float64 values; -0 equals +0, NaN equals NaN).
void expect_identical(const Tensor& gpu, const Tensor& cpu) {
  ASSERT_TRUE(gpu.is_cuda());
  EXPECT_CLOSE(gpu.cpu(), cpu, Tolerance{0, 0});
}

void expect_near_cpu(const Tensor& gpu, const Tensor& cpu) {
  ASSERT_TRUE(gpu.is_cuda());
  EXPECT_CLOSE(gpu.cpu(), cpu, cuda_tolerance(cpu.dtype()));
}

// --- factories ---

// arange and linspace fill on the device, with the CPU's values, and never wait for the GPU.
TEST_F(CudaKernels, ArangeAndLinspaceFillOnTheDevice) {
  for (ScalarType t : kAll) {
    SCOPED_TRACE(std::string(to_string(t)));
    if (t == kBool) continue;
    expect_identical(arange(0, 1000, 3, TensorOptions(t).device(kGpu)), arange(0, 1000, 3, t));
    if (t == kUInt8) continue;
    expect_identical(linspace(-5, 7.5, 1001, TensorOptions(t).device(kGpu)), linspace(-5, 7.5, 1001, t));
  }
  expect_identical(arange(-2.5, 3.0, 0.25, TensorOptions(kFloat64).device(kGpu)),
                   arange(-2.5, 3.0, 0.25, kFloat64));
  EXPECT_EQ(arange(0, TensorOptions(kInt64).device(kGpu)).numel(), 0);
  cuda::synchronize();
  EXPECT_TRUE(returns_without_waiting(cuda::current_stream().stream(), [] {
    arange(1 << 20, TensorOptions(kInt64).device(kGpu));
    linspace(0, 1, 1 << 20, TensorOptions(kFloat32).device(kGpu));
  }));
}

// --- the launcher ---

TEST_F(CudaKernels, VectorizedPathWithMisalignedSlicesAndOddSizes) {
  for (ScalarType dt : {kFloat32, kFloat16, kBFloat16}) {
    for (int64_t n : {1, 7, 8, 17, 1023, 4096 + 5}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " n=" + std::to_string(n));
      Tensor a = random_tensor({n + 1}, dt), b = random_tensor({n + 1}, dt);
      Tensor ga = a.to(kGpu), gb = b.to(kGpu);
      // Starting at element 1: 4 or 2 bytes past a 16-byte boundary, so not vectorizable.
      expect_near_cpu(ga.slice(0, 1) * gb.slice(0, 1), a.slice(0, 1) * b.slice(0, 1));
      expect_near_cpu(ga.slice(0, 1) + gb.slice(0, 0, n), a.slice(0, 1) + b.slice(0, 0, n));
      expect_near_cpu(exp(ga.slice(0, 1)), exp(a.slice(0, 1)));
      // Aligned, with a tail shorter than the vector width.
      expect_near_cpu(ga.slice(0, 0, n) - gb.slice(0, 0, n) * 3, a.slice(0, 0, n) - b.slice(0, 0, n) * 3);
      expect_near_cpu(sigmoid(ga.slice(0, 0, n)), sigmoid(a.slice(0, 0, n)));
      expect_identical(ga.slice(0, 0, n) > gb.slice(0, 0, n), a.slice(0, 0, n) > b.slice(0, 0, n));
      // In place on a misaligned slice.
      Tensor c = a.clone(), gc = c.to(kGpu);
      c.slice(0, 1).mul_(2);
      gc.slice(0, 1).mul_(2);
      expect_near_cpu(gc, c);
    }
  }
}

// The residual add of mixed precision (float32 + bf16/f16, either order, alpha too) is vectorized
// with each operand in its own type: aligned with odd tails, and misaligned (the strided path).
TEST_F(CudaKernels, MixedPrecisionAddMatchesTheCpu) {
  for (ScalarType half : {kBFloat16, kFloat16})
    for (int64_t n : {1, 7, 8, 4096 + 5}) {
      SCOPED_TRACE(std::string(to_string(half)) + " n=" + std::to_string(n));
      Tensor f = random_tensor({n + 1}, kFloat32), h = random_tensor({n + 1}, half);
      Tensor gf = f.to(kGpu), gh = h.to(kGpu);
      for (int64_t s : {0, 1}) {
        Tensor a = f.slice(0, s, s + n), b = h.slice(0, s, s + n), ga = gf.slice(0, s, s + n),
               gb = gh.slice(0, s, s + n);
        ASSERT_EQ((ga + gb).dtype(), kFloat32);
        expect_identical(ga + gb, a + b);
        expect_identical(gb + ga, b + a);
        expect_identical(ga.add(gb, 0.5), a.add(b, 0.5));
      }
    }
}

TEST_F(CudaKernels, HugeTensorsTakeSeveralVectorizedLaunches) {
  // 2^31 + 20 bf16 elements: the vectorized kernel's 32-bit indices reach 2^31, so the last 20
  // come from a second launch with every tensor operand advanced (a scalar operand stays).
  const int64_t n = (int64_t{1} << 31) + 20;
  if (cuda::mem_get_info().first < (size_t{16} << 30)) GTEST_SKIP() << "needs 16 GiB of free GPU memory";
  Tensor gx = randn({n}, TensorOptions(kBFloat16).device(kGpu));
  Tensor gy = gelu(gx), gz = gx * 3 + gy;
  for (int64_t first : {int64_t{0}, (int64_t{1} << 31) - 12}) {
    SCOPED_TRACE("from " + std::to_string(first));
    Tensor x = gx.slice(0, first, first + 32).cpu();
    expect_near_cpu(gy.slice(0, first, first + 32), gelu(x));
    expect_near_cpu(gz.slice(0, first, first + 32), x * 3 + gelu(x));
  }
}

TEST_F(CudaKernels, LargeBroadcastsAndStridedOperands) {
  Tensor a = random_tensor({512, 1024}, kFloat32), b = random_tensor({1024}, kFloat32);
  Tensor col = random_tensor({512, 1}, kFloat32), row = random_tensor({1, 1024}, kFloat32);
  Tensor ga = a.to(kGpu), gb = b.to(kGpu), gcol = col.to(kGpu), grow = row.to(kGpu);
  expect_near_cpu(ga + gb, a + b);
  expect_near_cpu(gcol * grow, col * row);
  expect_near_cpu(where(gcol > 0, ga, grow), where(col > 0, a, row));
  expect_near_cpu(ga.t() * gb.unsqueeze(1), a.t() * b.unsqueeze(1));
  expect_near_cpu(maximum(ga.slice(1, 0, std::nullopt, 3), gcol),
                  maximum(a.slice(1, 0, std::nullopt, 3), col));
  // Mixed dtypes read through the converting path.
  Tensor h = random_tensor({512, 1024}, kBFloat16);
  expect_near_cpu(h.to(kGpu) + ga, h + a);
  expect_near_cpu(h.to(kGpu).t() + gb.unsqueeze(1), h.t() + b.unsqueeze(1));
  // A transposed in-place update walks memory in order (the output's strides decide).
  Tensor t = a.clone(), gt = t.to(kGpu);
  t.t().add_(b.unsqueeze(1));
  gt.t().add_(gb.unsqueeze(1));
  expect_near_cpu(gt, t);
}

TEST_F(CudaKernels, ScalarsFromTheHostAndTheDevice) {
  Tensor x = random_tensor({3, 5}, kFloat32), gx = x.to(kGpu);
  expect_near_cpu(gx * 2.5, x * 2.5);
  expect_near_cpu(1 - gx, 1 - x);
  expect_near_cpu(gx.pow(2), x.pow(2));
  Tensor s = full({}, -0.75, kFloat32);
  expect_near_cpu(gx * s.to(kGpu), x * s);  // a 0-dim CUDA tensor, read once per thread
  expect_near_cpu(gx * s, x * s);           // a 0-dim CPU tensor goes with CUDA ones, as in PyTorch
  expect_near_cpu(s.to(kGpu) * gx, s * x);
  expect_near_cpu(gx.masked_fill(gx > 0, 7), x.masked_fill(x > 0, 7));
  expect_near_cpu(where(gx > 0, gx, 0.5), where(x > 0, x, 0.5));
  expect_near_cpu(clamp(gx, -0.5, 0.5), clamp(x, -0.5, 0.5));
  Tensor k = random_tensor({7}, kInt64, -5, 5), gk = k.to(kGpu);
  expect_identical(gk * 3 + 1, k * 3 + 1);
  expect_identical(gk / 2, k / 2);  // true division gives float32
  // A CPU scalar that requires grad gets its gradient on the CPU: d sum(x * w) / dw = sum(x).
  Tensor w = full({}, 2.0, kFloat64).requires_grad_();
  Tensor xd = tensor({1.0, 2.0, 4.5}, kFloat64).to(kGpu).requires_grad_();
  (xd * w).sum().backward();
  ASSERT_TRUE(w.grad().is_cpu());
  EXPECT_EQ(w.grad().item<double>(), 7.5);
  expect_identical(xd.grad(), full({3}, 2.0, kFloat64));
  EXPECT_EMBER_ERROR(gx + random_tensor({5}, kFloat32), "add", "same device");
  EXPECT_EMBER_ERROR(s.add_(gx), "add_", "same device");
}

TEST_F(CudaKernels, EveryUnaryAndBinaryDtypeMatchesTheCpu) {
  for (ScalarType dt : kAll) {
    SCOPED_TRACE(to_string(dt));
    Tensor a = random_tensor({6, 7}, dt, 0, 5), b = random_tensor({7}, dt, 1, 5);
    Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    expect_near_cpu(maximum(ga, gb), maximum(a, b));
    expect_identical(ga == gb, a == b);
    expect_identical(logical_xor(ga, gb), logical_xor(a, b));
    expect_near_cpu(ga * gb, a * b);
    expect_near_cpu(sign(ga), sign(a));
    if (dt == kBool) continue;
    expect_near_cpu(ga + gb, a + b);
    expect_near_cpu(sqrt(ga), sqrt(a));  // integers give float32
    expect_near_cpu(-ga, -a);
  }
}

// x Phi(x) in float64 from erfc: no cancellation in 1 + erf(x / sqrt 2) for large negative x.
double exact_gelu(double x) { return 0.5 * x * std::erfc(-x * M_SQRT1_2); }
// Its derivative, Phi(x) + x phi(x).
double exact_gelu_grad(double x) {
  return 0.5 * std::erfc(-x * M_SQRT1_2) + x * std::exp(-0.5 * x * x) * 0.3989422804014327;
}

TEST_F(CudaKernels, GeluOfTwoByteFloatsIsTheRoundedExactForm) {
  // f16 and bf16 take their own GELU kernels (erfc's fit instead of erff): each result is the
  // exact value for the rounded input, rounded to the dtype, or one unit of the last place from it.
  // Far left, where 1 + erf(x / sqrt 2) cancels to 0 in float64 (the CPU's and PyTorch's form),
  // they keep the tiny exact value. So do gelu_dropout's.
  const double kInf = std::numeric_limits<double>::infinity();
  Tensor x =
      cat({linspace(-10, 10, 20001, kFloat64), tensor({kInf, -kInf, std::nan(""), 0.0, -0.0}, kFloat64)}, 0);
  Tensor g = cat({linspace(-3, 3, 20001, kFloat64), tensor({1.0, 1.0, 1.0, 2.0, 2.0}, kFloat64)}, 0);
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(to_string(dt));
    Tensor xr = x.to(dt).to(kFloat64), gr = g.to(dt).to(kFloat64);
    Tensor expected = empty_like(xr), expected_grad = empty_like(xr);
    for (int64_t i = 0; i < xr.numel(); ++i) {
      const double xi = xr[i].item<double>();
      expected[i].fill_(exact_gelu(xi));
      expected_grad[i].fill_(gr[i].item<double>() * exact_gelu_grad(xi));
    }
    // One ulp: relative for normal values, the subnormal step below them.
    const double ulp = dt == kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    const double step = dt == kBFloat16 ? std::ldexp(1.0, -133) : std::ldexp(1.0, -24);
    EXPECT_CLOSE(gelu(xr.to(dt).cuda()).cpu().to(kFloat64), expected.to(dt).to(kFloat64),
                 Tolerance{ulp, step});
    EXPECT_CLOSE(gelu_backward(gr.to(dt).cuda(), xr.to(dt).cuda()).cpu().to(kFloat64),
                 expected_grad.to(dt).to(kFloat64), Tolerance{ulp, step});
    // gelu_dropout's kernels take the same forms (p = 1e-9: every element kept, scaled by 1 in float).
    Tensor xd = xr.to(dt).cuda().requires_grad_();
    Tensor yd = gelu_dropout(xd, 1e-9);
    EXPECT_CLOSE(yd.cpu().to(kFloat64), expected.to(dt).to(kFloat64), Tolerance{ulp, step});
    EXPECT_CLOSE(autograd::grad({yd}, {xd}, {gr.to(dt).cuda()})[0].cpu().to(kFloat64),
                 expected_grad.to(dt).to(kFloat64), Tolerance{ulp, step});
  }
}

TEST_F(CudaKernels, GeluOfFloat32MatchesTheCpuOnBothSidesOfErfsBranch) {
  // float32 GELU through erff, which changes polynomials at |x / sqrt 2| = 1.00295997
  // (x = 1.41840): both sides, the tails where erf saturates, and the special values.
  const float kInf = std::numeric_limits<float>::infinity();
  Tensor x = cat({linspace(-12, 12, 200001, kFloat32), linspace(1.4183f, 1.4185f, 2001, kFloat32),
                  linspace(-1.4185f, -1.4183f, 2001, kFloat32),
                  tensor({kInf, -kInf, std::nanf(""), 0.f, -0.f, 1e-40f, -1e-40f, 100.f, -100.f}, kFloat32)},
                 0);
  expect_near_cpu(gelu(x.to(kGpu)), gelu(x));
}

TEST_F(CudaKernels, PartlyOverlappingInPlaceUpdatesAreRefused) {
  // As PyTorch: an in-place op whose input shares some of the written memory is an error, before
  // anything is written, on the GPU as on the CPU.
  Tensor gx = arange(10).to(kFloat32).to(kGpu);
  EXPECT_EMBER_ERROR(gx.slice(0, 1).add_(gx.slice(0, 0, 9)), "add_", "refer to a single memory location");
  EXPECT_EMBER_ERROR(gx.slice(0, 1).copy_(gx.slice(0, 0, 9)), "copy_", "refer to a single memory location");
  EXPECT_EMBER_ERROR(gx.div_(gx[3]), "div_", "refer to a single memory location");
  expect_identical(gx, arange(10).to(kFloat32));
  // The same elements, or a clone, are fine.
  gx.add_(gx);
  gx.div_(gx[3].clone());
  expect_near_cpu(gx, arange(10).to(kFloat32) / 3);
}

// --- copies and fills ---

TEST_F(CudaKernels, CopyCastsEveryDtypePair) {
  // Exact in every dtype (uint8 included); bool reads them as nonzero.
  Tensor values = tensor({0, 1, 2, 3, 100, 0, 7, 64, 5, 9, 11, 12}, kFloat64).view({3, 4});
  for (ScalarType from : kAll) {
    Tensor src = values.to(from);
    for (ScalarType to : kAll) {
      SCOPED_TRACE(std::string(to_string(from)) + " -> " + std::string(to_string(to)));
      expect_identical(src.to(kGpu).to(to), src.to(to));
      expect_identical(src.to(kGpu).t().to(to), src.t().to(to));  // strided source
      Tensor dst = zeros({4, 3}, TensorOptions(to).device(kGpu));
      dst.t().copy_(src.to(kGpu));  // strided destination
      expect_identical(dst.t(), src.to(to));
    }
  }
  // Casts between the floats of mixed precision take the vectorized path; the rounding is the CPU's.
  Tensor f = random_tensor({10001}, kFloat32, -300, 300);
  for (ScalarType a : {kFloat32, kFloat16, kBFloat16})
    for (ScalarType b : {kFloat32, kFloat16, kBFloat16})
      expect_identical(f.to(a).to(kGpu).to(b), f.to(a).to(b));
}

// Rows at two pitches (a slice of columns, either side): the other columns stay.
TEST_F(CudaKernels, CopyOfRowsAtTwoPitches) {
  for (ScalarType dt : {kFloat32, kBFloat16, kInt64}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor x = random_tensor({5, 40}, kFloat32, -100, 100).to(dt);
    Tensor wide = x.to(kGpu);
    expect_identical(wide.narrow(1, 3, 33).contiguous(), x.narrow(1, 3, 33).contiguous());
    Tensor dst = zeros({5, 40}, TensorOptions(dt).device(kGpu));
    dst.narrow(1, 2, 33).copy_(wide.narrow(1, 7, 33));
    Tensor ref = zeros({5, 40}, TensorOptions(dt));
    ref.narrow(1, 2, 33).copy_(x.narrow(1, 7, 33));
    expect_identical(dst, ref);
  }
}

TEST_F(CudaKernels, HostDeviceCopiesOfNonContiguousTensors) {
  Tensor x = random_tensor({6, 8}, kFloat32);
  expect_identical(x.t().to(kGpu), x.t());  // strided host source: staged on the host
  Tensor d = zeros({8, 6}, TensorOptions(kFloat32).device(kGpu));
  d.t().copy_(x);  // strided device destination: staged on the device
  expect_identical(d.t(), x);
  Tensor h = zeros({8, 6});
  h.t().copy_(x.to(kGpu));  // strided host destination
  EXPECT_CLOSE(h.t(), x, Tolerance{0, 0});
  Tensor hx = zeros({6, 8}, kFloat16);
  hx.copy_(x.to(kGpu).t().t());  // cast on the device, then the transfer
  EXPECT_CLOSE(hx, x.to(kFloat16), Tolerance{0, 0});
  Tensor rows = zeros({4, 8}, TensorOptions(kFloat64).device(kGpu));
  rows.copy_(x[2]);  // broadcast host source with a cast
  expect_identical(rows, x[2].to(kFloat64).expand({4, 8}));
  // Device to device: strided to strided, and a broadcast scalar.
  Tensor g = x.to(kGpu), g2 = zeros({8, 6}, TensorOptions(kFloat32).device(kGpu));
  g2.copy_(g.t());
  expect_identical(g2, x.t().contiguous());
  g2.slice(1, 0, std::nullopt, 2).copy_(g[0][0]);
  EXPECT_EQ(g2[5][4].item<float>(), x[0][0].item<float>());
  EXPECT_EQ(g2[5][5].item<float>(), x[5][5].item<float>());
  // Zero-size and 0-dim tensors.
  EXPECT_EQ(zeros({0, 3}).to(kGpu).cpu().numel(), 0);
  EXPECT_EQ(full({}, 4.5).to(kGpu).item<float>(), 4.5f);
}

TEST_F(CudaKernels, NonBlockingCopiesFromAndToPinnedMemory) {
  constexpr int64_t n = 1 << 20;
  void* p = nullptr;
  ASSERT_EQ(cudaHostAlloc(&p, n * sizeof(float), cudaHostAllocDefault), cudaSuccess);
  Tensor pinned = from_blob(p, {n}, kFloat32, [](void* q) { cudaFreeHost(q); });
  Tensor x = random_tensor({n}, kFloat32);
  std::memcpy(pinned.data_ptr(), x.data_ptr(), n * sizeof(float));
  Tensor g = empty({n}, TensorOptions(kFloat32).device(kGpu));
  copy_stub(kGpu)(g, pinned, true);  // returns before the transfer ends
  Tensor back = empty({n}, kFloat32);
  copy_stub(kGpu)(back, g, false);  // a blocking copy on the same stream waits for both
  EXPECT_CLOSE(back, x, Tolerance{0, 0});
  Tensor doubled = g * 2;
  copy_stub(kGpu)(pinned, doubled, true);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_CLOSE(pinned, x * 2, Tolerance{0, 0});
}

TEST_F(CudaKernels, FillEveryDtypeAndLayout) {
  for (ScalarType dt : kAll) {
    SCOPED_TRACE(to_string(dt));
    for (double v : {0.0, 1.0, 3.0}) {
      expect_identical(full({1001}, v, TensorOptions(dt).device(kGpu)), full({1001}, v, dt));
      Tensor g = zeros({7, 9}, TensorOptions(dt).device(kGpu)), c = zeros({7, 9}, dt);
      g.slice(1, 1, std::nullopt, 2).fill_(v);
      c.slice(1, 1, std::nullopt, 2).fill_(v);
      expect_identical(g, c);
    }
  }
  expect_identical(full({33}, -1.5, TensorOptions(kBFloat16).device(kGpu)), full({33}, -1.5, kBFloat16));
}

// --- random draws: the CPU's numbers, bit for bit ---

TEST_F(CudaKernels, RandomDrawsEqualTheCpuBitForBit) {
  for (ScalarType dt : kFloats) {
    for (int64_t n : {1, 3, 5, 1001, 65536 + 3}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " n=" + std::to_string(n));
      Generator a(1234), b(1234);
      expect_identical(uniform_(empty({n}, TensorOptions(dt).device(kGpu)), -2, 3, &a),
                       uniform_(empty({n}, dt), -2, 3, &b));
      expect_identical(normal_(empty({n}, TensorOptions(dt).device(kGpu)), 0.5, 2, &a),
                       normal_(empty({n}, dt), 0.5, 2, &b));
      expect_identical(bernoulli_(empty({n}, TensorOptions(dt).device(kGpu)), 0.3, &a),
                       bernoulli_(empty({n}, dt), 0.3, &b));
    }
  }
  for (ScalarType dt : {kInt64, kInt32, kUInt8, kFloat32}) {
    Generator a(7), b(7);
    expect_identical(randint(-3, 250, {999}, TensorOptions(dt == kUInt8 ? kInt64 : dt).device(kGpu), &a),
                     randint(-3, 250, {999}, dt == kUInt8 ? kInt64 : dt, &b));
    expect_identical(randint(0, 200, {77}, TensorOptions(dt).device(kGpu), &a),
                     randint(0, 200, {77}, dt, &b));
  }
  Generator a(9), b(9);
  expect_identical(bernoulli_(empty({100}, TensorOptions(kBool).device(kGpu)), 0.5, &a),
                   bernoulli_(empty({100}, kBool), 0.5, &b));
  // A strided target is drawn contiguously, then copied in: the same values in the same places.
  Tensor g = zeros({6, 4}, TensorOptions(kFloat32).device(kGpu)), c = zeros({6, 4});
  normal_(g.t(), 0, 1, &a);
  normal_(c.t(), 0, 1, &b);
  expect_identical(g, c);
  // The float32 bits themselves, not only their values.
  Generator e(5), f(5);
  Tensor x = rand({4099}, TensorOptions(kFloat32).device(kGpu), &e).cpu(), y = rand({4099}, kFloat32, &f);
  EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0);
  // The default generators too, seeded together.
  manual_seed(3);
  Tensor gd = randn({257}, TensorOptions(kFloat64).device(kGpu));
  manual_seed(3);
  expect_identical(gd, randn({257}, kFloat64));
}

// --- reductions ---

Tensor layout(const Tensor& x, bool transposed) { return transposed ? x.permute({3, 1, 0, 2}) : x; }

TEST_F(CudaKernels, ReductionsOverEveryDimOfA4DTensor) {
  for (bool transposed : {false, true}) {
    Tensor base = random_tensor({3, 4, 5, 6}, kFloat32, 0.1, 2);
    Tensor x = layout(base, transposed), gx = layout(base.to(kGpu), transposed);
    std::vector<std::vector<int64_t>> dim_lists = {{0}, {1}, {2}, {3}, {0, 2}, {1, 3}, {0, 1, 2}, {}};
    for (const auto& dims : dim_lists) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(::testing::PrintToString(dims) + (keep ? " keepdim" : "") +
                     (transposed ? " permuted" : ""));
        expect_near_cpu(gx.sum(dims, keep), x.sum(dims, keep));
        expect_near_cpu(gx.mean(dims, keep), x.mean(dims, keep));
        expect_near_cpu(gx.amax(dims, keep), x.amax(dims, keep));
        expect_near_cpu(gx.amin(dims, keep), x.amin(dims, keep));
        expect_near_cpu(gx.var(dims, 1, keep), x.var(dims, 1, keep));
        expect_near_cpu(gx.std(dims, 0, keep), x.std(dims, 0, keep));
        expect_near_cpu(gx.norm(2, dims, keep), x.norm(2, dims, keep));
        expect_near_cpu(gx.norm(3, dims, keep), x.norm(3, dims, keep));
        expect_near_cpu(gx.logsumexp(dims, keep), x.logsumexp(dims, keep));
      }
    }
    for (int64_t d = 0; d < 4; ++d) {
      SCOPED_TRACE("dim " + std::to_string(d) + (transposed ? " permuted" : ""));
      auto [v, i] = gx.max(d);
      auto [cv, ci] = x.max(d);
      expect_identical(v, cv);
      expect_identical(i, ci);
      expect_identical(gx.argmin(d, true), x.argmin(d, true));
      expect_near_cpu(gx.prod(d), x.prod(d));
      expect_identical((gx > 1).all(d), (x > 1).all(d));
      expect_identical((gx > 1).any(d), (x > 1).any(d));
    }
    expect_identical(gx.argmax(), x.argmax());  // the flat index counts in logical order
  }
  Tensor ints = random_tensor({5, 6}, kInt32, -9, 9);
  expect_identical(ints.to(kGpu).sum({1}), ints.sum({1}));  // int64 results
  expect_identical(ints.to(kGpu).prod(0), ints.prod(0));
}

TEST_F(CudaKernels, LargeReductionsSliceTheReducedRange) {
  Tensor row = random_tensor({3, 100000}, kFloat32), col = random_tensor({70000, 3}, kFloat32);
  Tensor wide = random_tensor({4096, 256}, kFloat32), flat = random_tensor({1 << 20}, kFloat32);
  expect_near_cpu(row.to(kGpu).sum({1}), row.sum({1}));
  expect_near_cpu(col.to(kGpu).sum({0}), col.sum({0}));
  expect_near_cpu(wide.to(kGpu).sum({0}), wide.sum({0}));
  expect_near_cpu(wide.to(kGpu).var({0}), wide.var({0}));
  expect_near_cpu(flat.to(kGpu).sum(), flat.sum());
  expect_near_cpu(flat.to(kGpu).norm(), flat.norm());
  expect_near_cpu(flat.to(kGpu).logsumexp({0}), flat.logsumexp({0}));
  expect_identical(flat.to(kGpu).argmax(), flat.argmax());
  expect_identical(col.to(kGpu).argmin(0), col.argmin(0));
  expect_near_cpu(flat.to(kBFloat16).to(kGpu).sum(), flat.to(kBFloat16).sum());  // accumulated in double
  // The bias gradient's shape: 16-byte loads of 8 consecutive outputs a thread; rows of an even
  // length not a multiple of 8 (a 30522-word head's) load pairs; rows that start at odd
  // elements take the plain column kernel.
  for (ScalarType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor g = random_tensor({4096, 3072}, dt), odd = random_tensor({300, 1001}, dt);
    expect_near_cpu(g.to(kGpu).sum({0}), g.sum({0}));
    expect_near_cpu(g.to(kGpu).mean({0}), g.mean({0}));
    expect_near_cpu(odd.to(kGpu).narrow(1, 1, 1000).sum({0}), odd.narrow(1, 1, 1000).sum({0}));
    Tensor head = random_tensor({512, 30522}, dt);
    expect_near_cpu(head.to(kGpu).sum({0}), head.sum({0}));
  }
  // sum of 0..2^20-1 = 2^19 (2^20 - 1), exact in double and in float32 (a multiple of 2^19).
  EXPECT_EQ(arange(1 << 20).to(kFloat32).to(kGpu).sum().item<double>(), 524288.0 * 1048575.0);
}

TEST_F(CudaKernels, ArgmaxTiesNaNAndEmptyReductions) {
  Tensor t = tensor({{1.0, 3.0, 3.0, 2.0}, {5.0, 5.0, 5.0, 5.0}, {-1.0, -4.0, -4.0, 0.0}}).to(kGpu);
  expect_identical(t.argmax(1), tensor({1, 0, 3}));  // the first of equal maxima
  expect_identical(t.argmin(1), tensor({0, 0, 1}));
  // Ties across slices of a long row: the first index wins.
  Tensor flat = zeros({1000000});
  flat[900000].fill_(2);
  flat[777777].fill_(2);
  expect_identical(flat.to(kGpu).argmax(), tensor(777777));
  expect_identical(zeros({300000}).to(kGpu).argmin(), tensor(0));
  // NaN propagates through max/min and wins argmax (its first occurrence).
  Tensor n = tensor({{1.0, NAN, 2.0, NAN}, {3.0, 1.0, 2.0, 0.0}}).to(kGpu);
  EXPECT_TRUE(std::isnan(n.max().item<float>()));
  EXPECT_TRUE(std::isnan(n.amin({1})[0].item<float>()));
  EXPECT_EQ(n.amin({1})[1].item<float>(), 0.0f);
  expect_identical(n.argmax(1), tensor({1, 0}));
  expect_identical(n.argmin(1), tensor({1, 3}));
  EXPECT_TRUE(std::isnan(n.sum().item<float>()));
  EXPECT_TRUE(std::isnan(maximum(n, zeros({2, 4}).to(kGpu))[0][1].item<float>()));
  // Empty reductions: the identity, NaN for the mean, errors without an identity.
  Tensor e = zeros({3, 0}).to(kGpu);
  expect_identical(e.sum({1}), zeros({3}));
  expect_identical(e.prod(1), ones({3}));
  EXPECT_TRUE(std::isnan(e.mean({1})[0].item<float>()));
  expect_identical(e.any(1), zeros({3}, kBool));
  expect_identical(e.all(1), ones({3}, kBool));
  expect_identical(e.logsumexp({1}), full({3}, -INFINITY));
  expect_identical(e.sum({0}), zeros({0}));
  EXPECT_EMBER_ERROR(e.amax({1}), "amax", "non-zero size");
  EXPECT_EMBER_ERROR(zeros({0}).to(kGpu).max(), "max", "numel() == 0");
  // 0-dim inputs.
  EXPECT_EQ(full({}, 2.5).to(kGpu).sum().item<float>(), 2.5f);
  EXPECT_EQ(full({}, 2.5).to(kGpu).argmax().item<int64_t>(), 0);
}

// --- scans and the shape kernels ---

TEST_F(CudaKernels, CumsumAlongEveryDim) {
  expect_identical(tensor({1, 2, 3, 4}).to(kGpu).cumsum(0), tensor({1, 3, 6, 10}));
  Tensor x = random_tensor({3, 4, 50}, kFloat32);
  for (int64_t d = 0; d < 3; ++d) {
    expect_near_cpu(x.to(kGpu).cumsum(d), x.cumsum(d));
    expect_near_cpu(x.to(kGpu).permute({2, 0, 1}).cumsum(d), x.permute({2, 0, 1}).cumsum(d));
  }
  Tensor rows = random_tensor({5, 3000}, kFloat32), cols = random_tensor({3000, 2048}, kFloat16);
  expect_near_cpu(rows.to(kGpu).cumsum(1), rows.cumsum(1));  // a block per row
  expect_near_cpu(cols.to(kGpu).cumsum(0), cols.cumsum(0));  // a thread per column
  Tensor ints = random_tensor({4, 1000}, kInt32, -50, 50);
  expect_identical(ints.to(kGpu).cumsum(1), ints.cumsum(1));
  expect_identical(full({}, 3).to(kGpu).cumsum(0), full({}, 3));
}

TEST_F(CudaKernels, TrianglesAndRemapsOfStridedInputs) {
  // Strided on both devices: the views are taken after the transfer.
  Tensor xb = random_tensor({2, 3, 5, 4}, kFloat32);
  Tensor x = xb.transpose(2, 3), gx = xb.to(kGpu).transpose(2, 3);
  for (int64_t k : {-6, -1, 0, 2, 7}) {
    expect_identical(gx.tril(k), x.tril(k));
    expect_identical(gx.triu(k), x.triu(k));
  }
  Tensor yb = random_tensor({3, 4, 5}, kBFloat16);
  Tensor y = yb.permute({1, 2, 0}), gy = yb.to(kGpu).permute({1, 2, 0});
  expect_identical(flip(gy, {0, 2}), flip(y, {0, 2}));
  expect_identical(roll(gy, {2, -1}, {1, 2}), roll(y, {2, -1}, {1, 2}));
  expect_identical(pad(gy, {1, 2, 0, 1}, "constant", 1.5), pad(y, {1, 2, 0, 1}, "constant", 1.5));
  expect_identical(pad(gy, {2, 1}, "reflect"), pad(y, {2, 1}, "reflect"));
  expect_identical(gy.repeat({2, 1, 3}), y.repeat({2, 1, 3}));
}

}  // namespace
}  // namespace ember::testing
