// batch_norm's CUDA kernels against the CPU: forward (training with running stats, eval),
// backward (dx, dw, db) in NCHW (vector and scalar planes) and channels-last or [N, C] (column
// reductions, vector and scalar), float32 and bfloat16 (with float32 or bfloat16 parameters),
// misaligned data, batches large enough to split each channel over many blocks, and sync-free
// running-stat updates in their own dtype; batch_norm_relu (with and without a residual) the same
// way, and against the ops it fuses on the GPU.
#include "batch_norm_relu_mask.h"
#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class BatchNormCuda : public CudaTest {};

// The same values in channels-last (NHWC) memory.
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

bool is_channels_last_dense(const Tensor& t) {
  return t.dim() == 4 && !t.is_contiguous() && t.permute({0, 2, 3, 1}).is_contiguous();
}

// A contiguous copy of t whose data starts one element past a 16-byte boundary.
Tensor misaligned(const Tensor& t) {
  Tensor big = empty({t.numel() + 1}, t.options());
  Tensor view = big.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

struct Case {
  DimVector shape;
  ScalarType dtype, param_dtype;
  bool training, affine, cl, misalign;
  bool relu = false, residual = false;  // batch_norm_relu, with a residual
};

struct Result {
  Tensor y, rm, rv, dx, dw, db, dr;
};

// batch_norm (or batch_norm_relu) and its gradients on device d for host inputs x, gy and the
// residual r.
Result run(const Case& c, const Tensor& x, const Tensor& gy, const Tensor& w, const Tensor& b,
           const Tensor& r, Device d) {
  auto place = [&](const Tensor& t) {
    Tensor on = t.to(d);
    if (c.cl) return channels_last(on);
    return c.misalign ? misaligned(on) : on;
  };
  Tensor xd = place(x).requires_grad_();
  Tensor wd = c.affine ? w.to(d).requires_grad_() : Tensor(),
         bd = c.affine ? b.to(d).requires_grad_() : Tensor();
  const int64_t C = c.shape[1];
  Tensor rm = full({C}, 0.25, TensorOptions(c.param_dtype).device(d));
  Tensor rv = full({C}, 1.5, TensorOptions(c.param_dtype).device(d));
  Tensor rd = c.residual ? place(r).requires_grad_() : Tensor();
  Tensor y = c.relu ? batch_norm_relu(xd, rm, rv, wd, bd, c.training, 0.1, 1e-5, rd)
                    : batch_norm(xd, rm, rv, wd, bd, c.training, 0.1, 1e-5);
  // Channels-last in, channels-last out (C = 1 is both layouts at once).
  EXPECT_EQ(is_channels_last_dense(y), is_channels_last_dense(xd));
  std::vector<Tensor> leaves = {xd};
  if (c.affine) leaves.insert(leaves.end(), {wd, bd});
  if (c.residual) leaves.push_back(rd);
  auto g = autograd::grad({y}, leaves, {place(gy)});
  EXPECT_EQ(is_channels_last_dense(g[0]), is_channels_last_dense(xd));
  if (c.cl && c.shape[1] > 1) {
    EXPECT_TRUE(is_channels_last_dense(xd));
  }
  Result r{y.cpu(), rm.cpu(), rv.cpu(), g[0].cpu(), Tensor(), Tensor()};
  if (c.affine) r.dw = g[1].cpu(), r.db = g[2].cpu();
  if (c.residual) r.dr = g.back().cpu();
  return r;
}

void expect_matches_cpu(const Case& c) {
  SCOPED_TRACE(::testing::PrintToString(c.shape) + " " + std::string(to_string(c.dtype)) + " params " +
               std::string(to_string(c.param_dtype)) + (c.training ? " training" : " eval") +
               (c.affine ? " affine" : "") + (c.cl ? " channels-last" : "") +
               (c.misalign ? " misaligned" : "") + (c.relu ? " relu" : "") + (c.residual ? " residual" : ""));
  Tensor x = (random_tensor(c.shape, kFloat32) * 2 + 3).to(c.dtype);
  Tensor gy = random_tensor(c.shape, kFloat32).to(c.dtype);
  Tensor w = random_tensor({c.shape[1]}, kFloat32).to(c.param_dtype);
  Tensor b = random_tensor({c.shape[1]}, kFloat32).to(c.param_dtype);
  Tensor r = random_tensor(c.shape, kFloat32).to(c.dtype);
  Result got = run(c, x, gy, w, b, r, Device(kCUDA)), want = run(c, x, gy, w, b, r, Device(kCPU));
  Tolerance tol = cuda_tolerance(c.dtype), ptol = cuda_tolerance(c.param_dtype);
  EXPECT_CLOSE(got.y, want.y, tol);
  EXPECT_CLOSE(got.dx, want.dx, Tolerance{tol.rtol, tol.atol * 4});
  EXPECT_CLOSE(got.rm, want.rm, ptol);
  EXPECT_CLOSE(got.rv, want.rv, ptol);
  if (c.residual) EXPECT_CLOSE(got.dr, want.dr, tol);
  if (c.affine) {
    // Sums over N * H * W elements: an absolute error grows with their number.
    const double n = static_cast<double>(x.numel() / c.shape[1]);
    EXPECT_CLOSE(got.dw, want.dw, Tolerance{ptol.rtol, 1e-5 * n});
    EXPECT_CLOSE(got.db, want.db, Tolerance{ptol.rtol, 1e-5 * n});
  }
}

TEST_F(BatchNormCuda, NCHWAgainstCpu) {
  // B a multiple of the vector width (16-byte loads), then B = 49 (scalar), and a misaligned x.
  for (DimVector shape : {DimVector{8, 16, 28, 28}, DimVector{4, 6, 7, 7}, DimVector{3, 5, 9}})
    for (ScalarType dt : {kFloat32, kBFloat16})
      for (bool training : {true, false})
        for (bool affine : {true, false})
          expect_matches_cpu({shape, dt, kFloat32, training, affine, false, false});
  expect_matches_cpu({{4, 8, 16, 16}, kFloat32, kFloat32, true, true, false, true});
  expect_matches_cpu({{4, 8, 16, 16}, kFloat64, kFloat64, true, true, false, false});
  expect_matches_cpu({{4, 8, 16, 16}, kFloat16, kFloat16, true, true, false, false});
  // bfloat16 parameters and running stats, as after model.to(bfloat16).
  expect_matches_cpu({{4, 8, 16, 16}, kBFloat16, kBFloat16, true, true, false, false});
}

TEST_F(BatchNormCuda, ChannelsLastAndRowsAgainstCpu) {
  // C a multiple of the vector width (a thread holds 8 or 4 channels), C = 3 and 1 (scalar),
  // C = 520 (more than one tile of columns), and [N, C] inputs (the same column reduction).
  for (DimVector shape :
       {DimVector{8, 32, 14, 14}, DimVector{4, 3, 5, 5}, DimVector{2, 520, 3, 3}, DimVector{5, 1, 4, 4}})
    for (ScalarType dt : {kFloat32, kBFloat16})
      for (bool training : {true, false})
        for (bool affine : {true, false})
          expect_matches_cpu({shape, dt, kFloat32, training, affine, true, false});
  for (DimVector shape : {DimVector{1000, 24}, DimVector{300, 5}})
    for (ScalarType dt : {kFloat32, kBFloat16})
      expect_matches_cpu({shape, dt, kFloat32, true, true, false, false});
  expect_matches_cpu({{4, 16, 6, 6}, kBFloat16, kBFloat16, true, true, true, false});
  expect_matches_cpu({{4, 16, 6, 6}, kFloat64, kFloat64, true, true, true, false});
}

TEST_F(BatchNormCuda, ManyBlocksPerChannel) {
  // 2M elements: each channel's reduction is split over many blocks and merged.
  for (bool cl : {false, true})
    for (ScalarType dt : {kFloat32, kBFloat16})
      expect_matches_cpu({{32, 64, 32, 32}, dt, kFloat32, true, true, cl, false});
}

TEST_F(BatchNormCuda, FusedReluAndResidualAgainstCpu) {
  for (bool cl : {false, true})
    for (DimVector shape : {DimVector{8, 32, 14, 14}, DimVector{4, 6, 7, 7}})
      for (ScalarType dt : {kFloat32, kBFloat16})
        for (bool training : {true, false})
          for (bool residual : {true, false})
            expect_matches_cpu({shape, dt, kFloat32, training, true, cl, false, true, residual});
  expect_matches_cpu({{4, 8, 6, 6}, kFloat64, kFloat64, true, false, true, false, true, true});
  expect_matches_cpu({{4, 8, 6, 6}, kFloat16, kFloat32, true, true, false, true, true, true});
}

// The fused op against batch_norm, add and relu on the GPU (float32: a ReLU mask flips only
// where the two roundings straddle zero, about 1e-7 from it).
TEST_F(BatchNormCuda, FusedReluMatchesTheOpsItFusesOnTheGpu) {
  const DimVector shape{16, 64, 14, 14};
  Tensor x = random_tensor(shape, kFloat32), gy = random_tensor(shape, kFloat32);
  Tensor w = random_tensor({64}, kFloat32), b = random_tensor({64}, kFloat32),
         r = random_tensor(shape, kFloat32);
  Case c{shape, kFloat32, kFloat32, true, true, true, false, true, true};
  Result fused = run(c, x, gy, w, b, r, Device(kCUDA));
  Tensor xd = channels_last(x.cuda()).requires_grad_(), rd = channels_last(r.cuda()).requires_grad_();
  Tensor wd = w.cuda().requires_grad_(), bd = b.cuda().requires_grad_();
  Tensor rm = full({64}, 0.25, TensorOptions(kFloat32).device(kCUDA)), rv = full({64}, 1.5, rm.options());
  Tensor y = relu(batch_norm(xd, rm, rv, wd, bd, true, 0.1, 1e-5) + rd);
  auto g = autograd::grad({y}, {xd, wd, bd, rd}, {channels_last(gy.cuda())});
  const Tolerance tol = cuda_tolerance(kFloat32);
  EXPECT_CLOSE(fused.y, y.cpu(), tol);
  EXPECT_TRUE(fused.rm.equal(rm.cpu()));  // the same statistics kernel
  EXPECT_TRUE(fused.rv.equal(rv.cpu()));
  EXPECT_CLOSE(fused.dx, g[0].cpu(), tol);
  EXPECT_CLOSE(fused.dw, g[1].cpu(), Tolerance{tol.rtol, 1e-3});
  EXPECT_CLOSE(fused.db, g[2].cpu(), Tolerance{tol.rtol, 1e-3});
  EXPECT_CLOSE(fused.dr, g[3].cpu(), tol);
}

TEST_F(BatchNormCuda, TheBackwardsRecomputedReluMaskIsTheSavedOutputs) {
  expect_recomputed_relu_mask_is_the_saved_one(Device(kCUDA));
}

TEST_F(BatchNormCuda, StatisticsWithALargeOffset) {
  // Welford partials stay accurate when |mean| >> std, in both layouts.
  Tensor x = random_tensor({16, 8, 32, 32}, kFloat32) + 1000;
  for (bool cl : {false, true}) {
    Tensor xd = cl ? channels_last(x.cuda()) : x.cuda();
    auto [out, mean, invstd] = native_batch_norm(xd, {}, {}, {}, {}, true, 0.1, 1e-5);
    auto [ref, ref_mean, ref_invstd] = native_batch_norm(x.to(kFloat64), {}, {}, {}, {}, true, 0.1, 1e-5);
    EXPECT_CLOSE(mean.cpu(), ref_mean.to(kFloat32), Tolerance{1e-6, 0});
    EXPECT_CLOSE(invstd.cpu(), ref_invstd.to(kFloat32), Tolerance{1e-3, 0});
    EXPECT_CLOSE(out.contiguous().cpu(), ref.to(kFloat32), Tolerance{1e-2, 1e-2});
  }
}

}  // namespace
}  // namespace ember::testing
