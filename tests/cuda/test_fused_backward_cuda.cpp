// The fused backward kernels of softmax, log_softmax, layer_norm and cross_entropy on the GPU
// against the CPU: rows of 1, 33, 512, 1024 (the last a warp handles), 1025, 4097 and the lengths
// where a block stops holding a row in registers (16384 to 32769 elements), vector
// and scalar loads, other dims, batches large enough for the grid-stride loops, layer_norm rows too
// long for the register column sums, each subset of the gradients layer_norm can be asked for, and
// cross_entropy's options.
#include "cuda_test_util.h"

namespace ember::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

class FusedBackwardCuda : public CudaTest {};

// A contiguous copy of t whose data starts one element past a 16-byte boundary: the kernels
// must take their scalar path.
Tensor misaligned(const Tensor& t) {
  Tensor big = empty({t.numel() + 1}, t.options());
  Tensor view = big.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

// The gradients of fn(inputs) for the output gradient gy with respect to the inputs flagged in
// `wanted`, on device d, copied to the host. `place` puts a host tensor on d.
std::vector<Tensor> grads_on(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<bool>& wanted,
                             const Tensor& gy, Device d, Tensor (*place)(const Tensor&, Device)) {
  std::vector<Tensor> in, leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i].defined() ? place(inputs[i], d) : Tensor();
    if (t.defined() && wanted[i]) {
      t = t.detach().requires_grad_();
      leaves.push_back(t);
    }
    in.push_back(t);
  }
  std::vector<Tensor> out;
  for (const Tensor& g : autograd::grad({fn(in)}, leaves, {place(gy, d)})) out.push_back(g.cpu());
  return out;
}

Tensor plain(const Tensor& t, Device d) { return t.to(d); }
Tensor shifted(const Tensor& t, Device d) { return misaligned(t.to(d)); }

// CUDA gradients against CPU ones, with the CUDA suite's tolerance for the dtype times `scale`.
// With `exact`, the CPU computes them in float64 from the same values (then rounded to the dtype):
// for sums over many rows, where a float32 sum on the CPU strays as far as the GPU's.
void expect_grads_match(const Fn& fn, const std::vector<Tensor>& inputs, const std::vector<bool>& wanted,
                        const Tensor& gy, double scale = 1, Tensor (*place)(const Tensor&, Device) = plain,
                        bool exact = false) {
  std::vector<Tensor> ref_in;
  for (const Tensor& t : inputs) ref_in.push_back(exact && t.defined() ? t.to(kFloat64) : t);
  std::vector<Tensor> ref = grads_on(fn, ref_in, wanted, exact ? gy.to(kFloat64) : gy, kCPU, plain);
  std::vector<Tensor> got = grads_on(fn, inputs, wanted, gy, kCUDA, place);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i));
    Tolerance tol = cuda_tolerance(got[i].dtype());
    EXPECT_TRUE(
        assert_close(got[i], ref[i].to(got[i].dtype()), Tolerance{tol.rtol * scale, tol.atol * scale}));
  }
}

Fn softmax_fn(int64_t dim, bool log) {
  return [dim, log](const std::vector<Tensor>& in) {
    return log ? log_softmax(in[0], dim) : softmax(in[0], dim);
  };
}

constexpr ScalarType kFloatTypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64};

// --- softmax, log_softmax ---

TEST_F(FusedBackwardCuda, SoftmaxAtEveryStrategyBoundary) {
  for (int64_t K : {1, 33, 512, 513, 1024, 1025, 4097, 16385, 32769}) {
    for (ScalarType dt : kFloatTypes) {
      for (bool log : {false, true}) {
        SCOPED_TRACE("K " + std::to_string(K) + " " + std::string(to_string(dt)) + (log ? " log" : ""));
        Tensor x = random_tensor({5, K}, dt, -4, 4), gy = random_tensor({5, K}, dt);
        expect_grads_match(softmax_fn(-1, log), {x}, {true}, gy);
        expect_grads_match(softmax_fn(1, log), {x}, {true}, gy, 1, shifted);
      }
    }
  }
}

TEST_F(FusedBackwardCuda, SoftmaxLargeBatchAndOtherDims) {
  struct Case {
    DimVector shape;
    int64_t dim;
  };
  for (const Case& c : {Case{{70000, 40}, 1}, Case{{4096, 1024}, -1}, Case{{3, 37, 5}, 1},
                        Case{{2, 300, 40}, 1}, Case{{7, 3}, 0}, Case{{9, 1, 2}, 1}}) {
    for (ScalarType dt : {kFloat32, kBFloat16}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::PrintToString(c.shape) + " dim " + std::to_string(c.dim) + " " +
                     std::string(to_string(dt)) + (log ? " log" : ""));
        // bf16 twice as loose: each device rounds its own forward output y, and one ulp of a y near
        // -1 moves log_softmax's dx = dy - exp(y) sum(dy) by up to 0.016 where dx is near 0.
        expect_grads_match(softmax_fn(c.dim, log), {random_tensor(c.shape, dt, -4, 4)}, {true},
                           random_tensor(c.shape, dt), dt == kBFloat16 ? 2 : 1);
      }
    }
  }
}

TEST_F(FusedBackwardCuda, SoftmaxBackwardDataOpsMatchTheCpu) {
  // The public ops with outputs that are not softmax-shaped, and their double backward.
  Tensor gy = random_tensor({6, 33}, kFloat64), y = random_tensor({6, 33}, kFloat64, -1, 1);
  for (bool log : {false, true}) {
    Fn fn = [log](const std::vector<Tensor>& in) {
      return log ? _log_softmax_backward_data(in[0], in[1], 1, kFloat64)
                 : _softmax_backward_data(in[0], in[1], 1, kFloat64);
    };
    expect_grads_match(fn, {gy, y}, {true, true}, random_tensor({6, 33}, kFloat64));
  }
}

// --- layer_norm ---

Fn layer_norm_fn(IntArrayRef normalized) {
  DimVector shape(normalized);
  return [shape](const std::vector<Tensor>& in) { return layer_norm(in[0], shape, in[1], in[2]); };
}

// dx, dw and db for x [rows, N], weight and bias [N].
void expect_layer_norm_matches(int64_t rows, int64_t N, ScalarType dt, double scale = 1) {
  Tensor x = random_tensor({rows, N}, dt), gy = random_tensor({rows, N}, dt);
  Tensor w = random_tensor({N}, dt), b = random_tensor({N}, dt);
  // Parameter gradients sum over all the rows: against float64 sums.
  expect_grads_match(layer_norm_fn({N}), {x, w, b}, {true, true, true}, gy, scale, plain, true);
}

TEST_F(FusedBackwardCuda, LayerNormAtEveryStrategyBoundary) {
  for (int64_t N : {1, 33, 512, 513, 1024, 1025, 4097, 16385, 32769}) {
    for (ScalarType dt : kFloatTypes) {
      SCOPED_TRACE("N " + std::to_string(N) + " " + std::string(to_string(dt)));
      // A one-element row normalizes to 0 up to the rounding of x - mean, which dx scales by
      // rstd = 1 / sqrt(eps) ~ 316.
      const double scale = N == 1 ? 10 : 1;
      expect_layer_norm_matches(5, N, dt, scale);
      Tensor x = random_tensor({5, N}, dt), gy = random_tensor({5, N}, dt);
      expect_grads_match(layer_norm_fn({N}), {x, Tensor(), Tensor()}, {true, false, false}, gy, scale);
      expect_grads_match(layer_norm_fn({N}), {x, Tensor(), Tensor()}, {true, false, false}, gy, scale,
                         shifted);
    }
  }
}

TEST_F(FusedBackwardCuda, LayerNormLargeBatch) {
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(to_string(dt));
    expect_layer_norm_matches(32768, 64, dt, 4);
    expect_layer_norm_matches(4096, 1024, dt, 4);
    expect_layer_norm_matches(3001, 768, dt, 4);  // six warps a row in f32, a last tile of one row
    expect_layer_norm_matches(1000, 2048, dt, 4);
  }
}

TEST_F(FusedBackwardCuda, LayerNormRowsTooLongForRegisterSums) {
  // Rows longer than a block holds in registers take dx from a second read and dw and db from the
  // column-tile kernel.
  for (ScalarType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(to_string(dt));
    expect_layer_norm_matches(3, 40000, dt);
    expect_layer_norm_matches(70, 32769, dt, 2);
  }
}

TEST_F(FusedBackwardCuda, LayerNormComputesEachSubsetOfGradients) {
  Tensor x = random_tensor({40, 3, 96}, kFloat32), gy = random_tensor({40, 3, 96}, kFloat32);
  Tensor w = random_tensor({3, 96}, kFloat32), b = random_tensor({3, 96}, kFloat32);
  for (std::vector<bool> wanted : {std::vector<bool>{false, true, false},
                                   {false, false, true},
                                   {false, true, true},
                                   {true, false, true}}) {
    SCOPED_TRACE(::testing::PrintToString(wanted));
    expect_grads_match(layer_norm_fn({3, 96}), {x, w, b}, wanted, gy);
  }
  // The weight in another dtype than x: its gradient comes back in its own dtype.
  expect_grads_match(layer_norm_fn({96}), {x.to(kBFloat16), w[0], b[0]}, {true, true, true},
                     gy.to(kBFloat16));
}

// --- cross_entropy with class targets ---

TEST_F(FusedBackwardCuda, CrossEntropyMatchesTheCpu) {
  struct Case {
    DimVector shape;  // [N, C, D...] or [C]
    bool weighted;
    int64_t ignore;
    const char* reduction;
    double ls;
  };
  for (ScalarType dt : {kFloat32, kBFloat16, kFloat64}) {
    for (const Case& c : {Case{{64, 30522}, false, -100, "mean", 0}, Case{{8, 1000}, true, 3, "mean", 0.1},
                          Case{{4, 7, 5}, true, 1, "sum", 0.2}, Case{{3, 5, 2, 3}, false, 0, "none", 0},
                          Case{{33}, true, -100, "mean", 0.3}, Case{{300, 3}, false, 2, "mean", 0}}) {
      SCOPED_TRACE(::testing::PrintToString(c.shape) + " " + c.reduction + " " + std::string(to_string(dt)));
      const int64_t C = c.shape.size() == 1 ? c.shape[0] : c.shape[1];
      DimVector tshape(c.shape);
      tshape.erase(c.shape.size() == 1 ? 0 : 1);
      Tensor target = randint(0, C, tshape);
      Tensor w = c.weighted ? random_tensor({C}, dt, 0.5, 2) : Tensor();
      Fn fn = [c](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], in[1], in[2], c.ignore, c.reduction, c.ls);
      };
      Tensor loss = cross_entropy(random_tensor(c.shape, dt), target, w, c.ignore, c.reduction, c.ls);
      expect_grads_match(fn, {random_tensor(c.shape, dt, -4, 4), target, w}, {true, false, false},
                         random_tensor(loss.sizes(), dt));
    }
  }
}

}  // namespace
}  // namespace ember::testing
