// The fused backward kernels of softmax, log_softmax, layer_norm and cross_entropy against
// PyTorch's numbers and against the composite formulas they replace (written out here with ember
// ops in float64), in every floating dtype, and the create_graph path that keeps them
// differentiable.
#include "ember/core/shape.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor f64(const NestedList& l) { return tensor(l, kFloat64); }

// The composite formulas the kernels replace, in float64 along `dim`.
Tensor softmax_backward_composite(const Tensor& gy, const Tensor& y, int64_t dim, bool log) {
  Tensor g = gy.to(kFloat64), o = y.to(kFloat64);
  if (log) return g - exp(o) * g.sum({dim}, true);
  return o * (g - (g * o).sum({dim}, true));
}

// layer_norm's (dx, dw, db) for x [M, N] normalized over N, recomputing the statistics.
std::vector<Tensor> layer_norm_backward_composite(const Tensor& gy, const Tensor& x, const Tensor& w,
                                                  double eps) {
  Tensor g = gy.to(kFloat64), xd = x.to(kFloat64);
  Tensor mean = xd.mean({1}, true);
  Tensor rstd = rsqrt((xd - mean).square().mean({1}, true) + eps);
  Tensor xhat = (xd - mean) * rstd;
  Tensor gxhat = w.defined() ? g * w.to(kFloat64) : g;
  Tensor dx = rstd * (gxhat - gxhat.mean({1}, true) - xhat * (gxhat * xhat).mean({1}, true));
  return {dx, (g * xhat).sum({0}), g.sum({0})};
}

Tolerance grad_tolerance(ScalarType dt) {
  switch (dt) {
    case kFloat64:
      return {1e-12, 1e-12};
    case kFloat32:
      return {1e-5, 1e-5};
    default:
      return {2e-2, 2e-2};  // inputs and results rounded to f16/bf16
  }
}

TEST(FusedBackward, SoftmaxBackwardDataMatchesPyTorch) {
  Tensor x = f64({{0.5, -1.0, 2.0, 0.25}, {1.5, 0.0, -0.5, 3.0}});
  Tensor gy = f64({{1.0, -2.0, 0.5, 3.0}, {0.25, 1.0, -1.0, 2.0}});
  // torch._softmax_backward_data(gy, torch.softmax(x, 1), 1, torch.float64) and the log variant.
  EXPECT_CLOSE(_softmax_backward_data(gy, softmax(x, 1), 1, kFloat64),
               f64({{0.0321769603, -0.0960636735, -0.2014091341, 0.2652958473},
                    {-0.2298953687, -0.0226419342, -0.0600795008, 0.3126168037}}),
               Tolerance{0, 1e-9});
  EXPECT_CLOSE(_log_softmax_backward_data(gy, log_softmax(x, 1), -1, kFloat64),
               f64({{0.6144129368, -2.0860361032, -1.2280813269, 2.6997044932},
                    {-0.1352637794, 0.9140360312, -1.0521397827, 0.2733675308}}),
               Tolerance{0, 1e-9});
}

TEST(FusedBackward, SoftmaxGradientsMatchTheComposite) {
  struct Case {
    DimVector shape;
    int64_t dim;
  };
  for (ScalarType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    for (const Case& c : {Case{{3, 5}, 1}, Case{{2, 4, 3}, 1}, Case{{4, 3}, 0}, Case{{2, 3, 300}, 1},
                          Case{{1, 1}, 1}, Case{{2, 1, 7}, -1}}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ::testing::PrintToString(c.shape) + " dim " +
                     std::to_string(c.dim) + (log ? " log_softmax" : " softmax"));
        Tensor x = random_tensor(c.shape, dt, -3, 3).requires_grad_();
        Tensor gy = random_tensor(c.shape, dt);
        Tensor y = log ? log_softmax(x, c.dim) : softmax(x, c.dim);
        Tensor gx = autograd::grad({y}, {x}, {gy})[0];
        EXPECT_EQ(gx.dtype(), dt);
        EXPECT_CLOSE(gx.to(kFloat64), softmax_backward_composite(gy, y.detach(), c.dim, log),
                     grad_tolerance(dt));
      }
    }
  }
}

TEST(FusedBackward, SoftmaxBackwardDataTakesAnyLayoutAndCastsToTheInputDtype) {
  Tensor y = softmax(random_tensor({4, 6}, kFloat32), 0);
  Tensor gy = random_tensor({6, 4}, kFloat64).t();  // non-contiguous, another dtype
  Tensor gx = _softmax_backward_data(gy, y, 0, kFloat64);
  EXPECT_EQ(gx.dtype(), kFloat64);
  EXPECT_CLOSE(gx, softmax_backward_composite(gy.to(kFloat32), y, 0, false), Tolerance{1e-5, 1e-6});
  // One element: a 0-dim output is a row of one.
  Tensor one = full({}, 0.25, kFloat64);
  EXPECT_CLOSE(_softmax_backward_data(full({}, 2.0, kFloat64), one, 0, kFloat64),
               full({}, 0.25 * (2 - 2 * 0.25), kFloat64));
  EXPECT_EQ(_log_softmax_backward_data(empty({0, 3}), empty({0, 3}), 1, kFloat32).sizes().vec(),
            (std::vector<int64_t>{0, 3}));
}

TEST(FusedBackward, SoftmaxBackwardDataErrors) {
  Tensor y = softmax(random_tensor({2, 3}, kFloat32), 1);
  EXPECT_EMBER_ERROR(_softmax_backward_data(random_tensor({3, 2}, kFloat32), y, 1, kFloat32),
                     "_softmax_backward_data", "grad_output of shape [3, 2]", "output of shape [2, 3]");
  EXPECT_EMBER_ERROR(_log_softmax_backward_data(y, y, 2, kFloat32), "_log_softmax_backward_data", "dim");
  EXPECT_EMBER_ERROR(_softmax_backward_data(y, y.to(kInt64), 1, kFloat32), "_softmax_backward_data",
                     "floating point", "int64");
  EXPECT_EMBER_ERROR(_softmax_backward_data(y, y, 1, kInt32), "_softmax_backward_data", "input_dtype",
                     "int32");
}

TEST(FusedBackward, SoftmaxBackwardUnderCreateGraphIsDifferentiable) {
  // d/dx of sum(w * d/dx sum(v * softmax(x))) through the fused op's recorded backward, against
  // the same second derivative of the composite formula.
  Tensor x = random_tensor({2, 5}, kFloat64).requires_grad_();
  Tensor v = random_tensor({2, 5}, kFloat64), w = random_tensor({2, 5}, kFloat64);
  for (bool log : {false, true}) {
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    Tensor gx = autograd::grad({y}, {x}, {v}, false, true)[0];
    Tensor ggx = autograd::grad({gx}, {x}, {w})[0];
    Tensor yc = log ? log_softmax(x, 1) : softmax(x, 1);
    Tensor ref = autograd::grad({softmax_backward_composite(v, yc, 1, log)}, {x}, {w})[0];
    EXPECT_CLOSE(ggx, ref, Tolerance{1e-12, 1e-12});
  }
}

TEST(FusedBackward, LayerNormGradientsMatchPyTorch) {
  Tensor x = f64({{0.5, -1.0, 2.0, 0.25}, {1.5, 0.0, -0.5, 3.0}}).requires_grad_();
  Tensor w = f64({0.5, 2.0, -1.0, 1.5}).requires_grad_();
  Tensor b = f64({0.1, 0.2, 0.3, 0.4}).requires_grad_();
  Tensor gy = f64({{1.0, -2.0, 0.5, 3.0}, {0.25, 1.0, -1.0, 2.0}});
  auto g = autograd::grad({layer_norm(x, {4}, w, b)}, {x, w, b}, {gy});
  // xx.grad, w.grad, b.grad after F.layer_norm(xx, [4], w, b, 1e-5).backward(gy) in PyTorch.
  Tolerance tol{0, 1e-9};
  EXPECT_CLOSE(g[0],
               f64({{0.2981405225, -2.6365358348, -1.9258117888, 4.2642071011},
                    {-1.1517350856, 0.5918417434, -0.0136950236, 0.5735883658}}),
               tol);
  EXPECT_CLOSE(g[1], f64({0.1499076298, 1.9662610991, 1.8282019479, 2.3935921606}), tol);
  EXPECT_CLOSE(g[2], f64({1.25, -1.0, -0.5, 5.0}), tol);
}

TEST(FusedBackward, LayerNormGradientsMatchTheComposite) {
  struct Case {
    DimVector shape, normalized;
    double low, high;
  };
  for (ScalarType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    for (const Case& c : {Case{{5, 7}, {7}, -2, 2}, Case{{2, 3, 4}, {3, 4}, -2, 2},
                          Case{{3, 6}, {6}, 90, 110}, Case{{1, 1}, {1}, -2, 2}, Case{{700, 9}, {9}, -2, 2}}) {
      for (bool affine : {true, false}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ::testing::PrintToString(c.shape) +
                     (affine ? " affine" : " no affine"));
        int64_t N = numel_of(c.normalized), M = numel_of(c.shape) / N;
        Tensor x = random_tensor(c.shape, dt, c.low, c.high).requires_grad_();
        Tensor w = affine ? random_tensor(c.normalized, dt).requires_grad_() : Tensor();
        Tensor b = affine ? random_tensor(c.normalized, dt).requires_grad_() : Tensor();
        Tensor gy = random_tensor(c.shape, dt);
        Tensor y = layer_norm(x, c.normalized, w, b);
        std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
        auto g = autograd::grad({y}, inputs, {gy});
        auto ref = layer_norm_backward_composite(gy.reshape({M, N}), x.detach().reshape({M, N}),
                                                 affine ? w.detach().reshape({N}) : Tensor(), 1e-5);
        Tolerance tol = grad_tolerance(dt);
        EXPECT_EQ(g[0].dtype(), dt);
        EXPECT_CLOSE(g[0].to(kFloat64), ref[0].reshape(c.shape), tol);
        if (!affine) continue;
        // Sums over up to 700 rows: scale the tolerance with the count.
        Tolerance sum_tol{tol.rtol * 4, tol.atol * std::max<double>(1.0, std::sqrt(static_cast<double>(M)))};
        EXPECT_EQ(g[1].dtype(), dt);
        EXPECT_CLOSE(g[1].to(kFloat64), ref[1].reshape(c.normalized), sum_tol);
        EXPECT_CLOSE(g[2].to(kFloat64), ref[2].reshape(c.normalized), sum_tol);
      }
    }
  }
}

TEST(FusedBackward, LayerNormComputesOnlyTheGradientsAsked) {
  Tensor x = random_tensor({4, 5}, kFloat64);
  Tensor w = random_tensor({5}, kFloat64).requires_grad_(), b = random_tensor({5}, kFloat64);
  Tensor gy = random_tensor({4, 5}, kFloat64);
  // Only the weight requires grad: no dx, and the bias' gradient is not asked.
  Tensor dw = autograd::grad({layer_norm(x, {5}, w, b)}, {w}, {gy})[0];
  EXPECT_CLOSE(dw, layer_norm_backward_composite(gy, x, w.detach(), 1e-5)[1], Tolerance{1e-12, 1e-12});
  // Zero rows: zero parameter gradients.
  Tensor x0 = empty({0, 5}, kFloat64).requires_grad_();
  auto g0 = autograd::grad({layer_norm(x0, {5}, w, b)}, {x0, w}, {empty({0, 5}, kFloat64)});
  EXPECT_EQ(g0[0].sizes().vec(), (std::vector<int64_t>{0, 5}));
  EXPECT_CLOSE(g0[1], zeros({5}, kFloat64));
}

TEST(FusedBackward, LayerNormParameterSumsDoNotDependOnTheThreadCount) {
  Tensor x = random_tensor({3000, 16}, kFloat32).requires_grad_();
  Tensor w = random_tensor({16}, kFloat32).requires_grad_(),
         b = random_tensor({16}, kFloat32).requires_grad_();
  Tensor gy = random_tensor({3000, 16}, kFloat32);
  auto run = [&] { return autograd::grad({layer_norm(x, {16}, w, b)}, {x, w, b}, {gy}); };
  int threads = get_num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(threads);
  auto many = run();
  for (size_t i = 0; i < 3; ++i) EXPECT_CLOSE(many[i], one[i], Tolerance{0, 0});
}

TEST(FusedBackward, LayerNormUnderCreateGraphMatchesTheFusedFirstOrder) {
  // create_graph takes the composite formula; its first derivatives must equal the kernel's.
  Tensor x = random_tensor({3, 6}, kFloat64).requires_grad_();
  Tensor w = random_tensor({6}, kFloat64).requires_grad_(), b = random_tensor({6}, kFloat64).requires_grad_();
  Tensor gy = random_tensor({3, 6}, kFloat64);
  auto fused = autograd::grad({layer_norm(x, {6}, w, b)}, {x, w, b}, {gy});
  auto graph = autograd::grad({layer_norm(x, {6}, w, b)}, {x, w, b}, {gy}, false, true);
  for (size_t i = 0; i < 3; ++i) EXPECT_CLOSE(graph[i], fused[i], Tolerance{1e-12, 1e-12});
  EXPECT_TRUE(graph[0].requires_grad());
}

// cross_entropy for class targets written out in float64 with ember ops (log_softmax, one_hot,
// sums): input [N, C, D], target [N, D].
Tensor cross_entropy_composite(const Tensor& x, const Tensor& target, const Tensor& w, int64_t ignore,
                               const std::string& reduction, double ls) {
  int64_t C = x.size(1);
  Tensor logp = log_softmax(x.to(kFloat64), 1);
  Tensor valid = target != ignore;
  Tensor onehot = one_hot(where(valid, target, 0), C).permute({0, 2, 1}).to(kFloat64);  // [N, C, D]
  Tensor wc = w.defined() ? w.to(kFloat64).view({1, C, 1}) : ones({1, C, 1}, kFloat64);
  Tensor mix = onehot * (1 - ls) + ls / static_cast<double>(C);
  Tensor loss = -(mix * wc * logp).sum({1}) * valid.to(kFloat64);  // [N, D]
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  return loss.sum() / ((onehot * wc).sum({1}) * valid.to(kFloat64)).sum();
}

TEST(FusedBackward, CrossEntropyGradientsMatchTheComposite) {
  struct Case {
    DimVector shape;  // [N, C, D...]
    bool weighted;
    int64_t ignore;
    const char* reduction;
    double ls;
  };
  for (ScalarType dt : {kFloat64, kFloat32, kBFloat16}) {
    for (const Case& c : {Case{{6, 5}, false, -100, "mean", 0}, Case{{6, 5}, true, 2, "mean", 0.2},
                          Case{{4, 3, 7}, true, 1, "sum", 0.1}, Case{{3, 4, 2, 2}, false, 0, "none", 0.3},
                          Case{{5, 300}, false, 7, "mean", 0.1}, Case{{2, 3}, true, -100, "none", 0}}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " " + ::testing::PrintToString(c.shape) + " " + c.reduction);
      DimVector tshape(c.shape);
      tshape.erase(1);
      int64_t C = c.shape[1];
      Tensor x = random_tensor(c.shape, dt, -3, 3).requires_grad_();
      Tensor target = randint(0, C, tshape);
      target.view({-1}).narrow(0, 0, 1).fill_(c.ignore >= 0 ? c.ignore : 1);  // one ignored target
      Tensor w = c.weighted ? random_tensor({C}, kFloat32, 0.5, 2) : Tensor();
      Tensor loss = cross_entropy(x, target, w, c.ignore, c.reduction, c.ls);
      Tensor gy = random_tensor(loss.sizes(), loss.dtype());
      Tensor gx = autograd::grad({loss}, {x}, {gy})[0];
      EXPECT_EQ(gx.dtype(), dt);
      // The reference in [N, C, D].
      int64_t N = c.shape[0], D = x.numel() / (N * C);
      Tensor xr = x.detach().to(kFloat64).reshape({N, C, D}).requires_grad_();
      Tensor ref_loss = cross_entropy_composite(xr, target.reshape({N, D}), w, c.ignore, c.reduction, c.ls);
      Tensor ref = autograd::grad({ref_loss}, {xr}, {gy.to(kFloat64).reshape(ref_loss.sizes())})[0];
      EXPECT_CLOSE(gx.to(kFloat64), ref.reshape(c.shape), grad_tolerance(dt));
    }
  }
}

// A wide odd number of classes: the gradient's rows start 16 bytes apart (1030 float32 or bf16
// elements padded to 1032; float64 rows of 8240 bytes already do), with the composite's values.
TEST(FusedBackward, CrossEntropyGradientOfWideRowsHasAlignedRows) {
  for (ScalarType dt : {kFloat32, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(3);
    Tensor x = random_tensor({3, 1030}, dt, -3, 3).requires_grad_();
    Tensor target = tensor({5, 1029, 0}, kInt64);
    Tensor gx = autograd::grad({cross_entropy(x, target, {}, -100, "mean", 0.1)}, {x})[0];
    EXPECT_TRUE(gx.sizes().equals({3, 1030}));
    EXPECT_EQ(gx.stride(0), dt == kFloat64 ? 1030 : 1032);
    Tensor xr = x.detach().to(kFloat64).view({3, 1030, 1}).requires_grad_();
    Tensor ref =
        autograd::grad({cross_entropy_composite(xr, target.view({3, 1}), {}, -100, "mean", 0.1)}, {xr})[0];
    EXPECT_CLOSE(gx.to(kFloat64), ref.view({3, 1030}), grad_tolerance(dt));
  }
}

// Logits with padded rows (a wide head's output on the GPU) are read in place, with the values of
// their contiguous copy.
TEST(FusedBackward, CrossEntropyReadsLogitsWithPaddedRows) {
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    manual_seed(4);
    Tensor wide = random_tensor({3, 1036}, dt, -3, 3);
    Tensor padded = wide.narrow(1, 0, 1030).requires_grad_();
    Tensor dense = padded.detach().contiguous().requires_grad_();
    ASSERT_EQ(padded.stride(0), 1036);
    Tensor target = tensor({5, 1029, 0}, kInt64);
    Tensor loss = cross_entropy(padded, target, {}, -100, "sum", 0.1);
    Tensor ref = cross_entropy(dense, target, {}, -100, "sum", 0.1);
    EXPECT_CLOSE(loss, ref, Tolerance{0, 0});
    EXPECT_CLOSE(autograd::grad({loss}, {padded})[0], autograd::grad({ref}, {dense})[0], Tolerance{0, 0});
  }
}

TEST(FusedBackward, CrossEntropyOfAOneDimInputAndUnderCreateGraph) {
  Tensor x = random_tensor({5}, kFloat64).requires_grad_();
  Tensor target = full({}, 3, kInt64);
  Tensor gx = autograd::grad({cross_entropy(x, target, {}, -100, "mean", 0.1)}, {x})[0];
  Tensor xr = x.detach().view({1, 5, 1}).requires_grad_();
  Tensor ref =
      autograd::grad({cross_entropy_composite(xr, target.view({1, 1}), {}, -100, "mean", 0.1)}, {xr})[0];
  EXPECT_CLOSE(gx, ref.view({5}), Tolerance{1e-12, 1e-12});
  // create_graph takes the composite formula: the same first derivatives, and a graph.
  Tensor gg = autograd::grad({cross_entropy(x, target, {}, -100, "mean", 0.1)}, {x}, {}, false, true)[0];
  EXPECT_CLOSE(gg, gx, Tolerance{1e-12, 1e-12});
  EXPECT_TRUE(gg.requires_grad());
}

}  // namespace
}  // namespace ember::testing
