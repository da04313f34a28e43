// batch_norm's fused kernels (statistics, elementwise map, backward reduce and elementwise) on the
// CPU: values and gradients against PyTorch, channels-last inputs kept channels-last, reduced
// precision against float64, and the fused first-order backward against the composite formula
// that create_graph records.
#include "ember/autograd/engine.h"
#include "ember/autograd/gradcheck.h"
#include "ember/core/ops/normalization.h"
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor f64(const NestedList& v) { return tensor(v, kFloat64); }

// The PyTorch inputs: i = torch.arange(24, dtype=torch.float64);
// x = ((i * 0.37).sin() * 2 + i * 0.1).view(2, 3, 2, 2); gy = (i * 0.23).cos().view(2, 3, 2, 2).
Tensor wave_x() {
  Tensor i = arange(24, TensorOptions(kFloat64));
  return ((i * 0.37).sin() * 2 + i * 0.1).view({2, 3, 2, 2});
}
Tensor wave_gy() { return (arange(24, TensorOptions(kFloat64)) * 0.23).cos().view({2, 3, 2, 2}); }

// The same values in channels-last (NHWC) memory.
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

bool is_channels_last_dense(const Tensor& t) {
  return !t.is_contiguous() && t.permute({0, 2, 3, 1}).is_contiguous();
}

struct BnResult {
  Tensor y, rm, rv, dx, dw, db;
};

// batch_norm of x with w = [0.5, -1.2, 2], b = [0.1, 0.2, -0.3], running stats ([0.1, -0.2,
// 0.3], [1.5, 0.5, 2]) in `stat_dtype` (cycled for C > 3), momentum 0.1, eps 1e-5, and its
// gradients for gy.
BnResult run_bn(const Tensor& x, const Tensor& gy, bool training, ScalarType param_dtype = kFloat64,
                ScalarType stat_dtype = kFloat64, bool create_graph = false) {
  // C values cycling through `v` (the PyTorch inputs have C = 3).
  const int64_t C = x.size(1);
  auto per_channel = [C](std::vector<double> v, ScalarType dt) {
    std::vector<double> out;
    for (int64_t c = 0; c < C; ++c) out.push_back(v[static_cast<size_t>(c) % v.size()]);
    return tensor(out, kFloat64).to(dt);
  };
  Tensor xl = x.detach().requires_grad_();
  Tensor w = per_channel({0.5, -1.2, 2.0}, param_dtype).requires_grad_();
  Tensor b = per_channel({0.1, 0.2, -0.3}, param_dtype).requires_grad_();
  Tensor rm = per_channel({0.1, -0.2, 0.3}, stat_dtype), rv = per_channel({1.5, 0.5, 2.0}, stat_dtype);
  Tensor y = batch_norm(xl, rm, rv, w, b, training, 0.1, 1e-5);
  auto g = autograd::grad({y}, {xl, w, b}, {gy.to(y.dtype())}, false, create_graph);
  return {y, rm, rv, g[0], g[1], g[2]};
}

// torch.nn.functional.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5) and
// torch.autograd.grad(y, (x, w, b), gy) with the inputs above (float64, PyTorch 2.15 CPU).
const BnResult& torch_training() {
  static const BnResult r{
      f64({-0.080613666144631, 0.340791100394729,  0.712088918100758,  0.989954578602391,  -0.252263270009917,
           -0.308498477727778, 0.110533309891181,  0.923397454161941,  -1.316757065869126, -1.985769555037855,
           -2.601433239033678, -3.066178981641296, -0.452380837970431, -0.434064234029869, -0.27784303139524,
           0.002067172442294,  2.49161199011135,   0.986337124757485,  -0.515568493680811, -1.83554963750345,
           1.457254986035361,  1.768236853967348,  1.79538370799799,   1.549263293581259})
          .view({2, 3, 2, 2}),
      f64({0.125283593405654, 0.034414802606006, 0.482744609890516}),
      f64({1.459036475515032, 0.499329981241018, 2.212855956302373}),
      f64({0.65571506597048,   0.340316339734166,  0.034567195037664,  -0.228399217445212, -1.258471815903516,
           -0.880313550791749, -0.612725275302136, -0.451080561163334, 0.118268131062388,  0.040565189099371,
           -0.022263531571284, -0.081143049149545, -0.064893162221921, -0.108964734491882, -0.225188439420674,
           -0.403153047162621, 0.550919108992305,  0.770764396474562,  0.92038056522064,   0.960527132473228,
           -0.32600714049972,  -0.152469598545113, 0.076583348820289,  0.346466650783614})
          .view({2, 3, 2, 2}),
      f64({5.598515413536278, 1.657359197361947, 3.322373177476047}),
      f64({-0.225385556559913, -1.290170250207165, -1.337836729594567})};
  return r;
}

const BnResult& torch_eval() {
  static const BnResult r{
      f64({0.059175307035697,  0.395256779622469,  0.691376632199508,  0.912981862556964,  -4.198321454360485,
           -4.250571117034242, -3.861237273679062, -3.105983064415259, 0.917907119162534,  0.01877803379481,
           -0.808652147326482, -1.433253961559493, -0.23731886789425,  -0.222710890685815, -0.098120340223167,
           0.125115467644695,  -1.648912239416543, -3.047504102731438, -4.442965506998573, -5.669395928425587,
           4.646081046269706,  5.064029660094633,  5.10051407022203,   4.769736952174792})
          .view({2, 3, 2, 2}),
      f64({0.1, -0.2, 0.3}),
      f64({1.5, 0.5, 2.0}),
      f64({0.408246929643032,  0.397496316257544,  0.365810680913766,  0.314858817621993,  -1.028100617306245,
           -0.693219242591178, -0.321827944457973, 0.066513133606409,  -0.376128779666757, -0.677019878869683,
           -0.942254229945282, -1.157862679629094, -0.378882834428448, -0.40356508070722,  -0.406992680136057,
           -0.388985110616081, 1.456953102046491,  1.220202588875303,  0.919187409726392,  0.569761194249948,
           -0.158607228128393, 0.16594350011746,   0.481754447196276,  0.77219273164135})
          .view({2, 3, 2, 2}),
      f64({4.41843609058939, -2.737136524141241, 2.736404184215738}),
      f64({-0.225385556559913, -1.290170250207165, -1.337836729594567})};
  return r;
}

void expect_result(const BnResult& got, const BnResult& want, Tolerance tol) {
  EXPECT_CLOSE(got.y.to(kFloat64), want.y, tol);
  EXPECT_CLOSE(got.rm.to(kFloat64), want.rm, tol);
  EXPECT_CLOSE(got.rv.to(kFloat64), want.rv, tol);
  EXPECT_CLOSE(got.dx.to(kFloat64), want.dx, tol);
  EXPECT_CLOSE(got.dw.to(kFloat64), want.dw, tol);
  EXPECT_CLOSE(got.db.to(kFloat64), want.db, tol);
}

TEST(BatchNormFused, TrainingAndEvalMatchPyTorch) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    const BnResult& want = training ? torch_training() : torch_eval();
    expect_result(run_bn(wave_x(), wave_gy(), training), want, Tolerance{1e-12, 1e-12});
    BnResult f32 = run_bn(wave_x().to(kFloat32), wave_gy(), training, kFloat32, kFloat32);
    EXPECT_EQ(f32.y.dtype(), kFloat32);
    EXPECT_EQ(f32.dx.dtype(), kFloat32);
    expect_result(f32, want, Tolerance{1e-5, 1e-5});
  }
}

TEST(BatchNormFused, WithoutWeightAndBiasMatchesPyTorch) {
  // torch.nn.functional.batch_norm(x, None, None, None, None, True, 0.1, 1e-5), grad for gy.
  Tensor y_want =
      f64({-0.361227332289262, 0.481582200789459,  1.224177836201516,  1.779909157204782,  0.376886058341597,
           0.423748731439815,  0.074555575090682,  -0.602831211801618, -0.508378532934563, -0.842884777518928,
           -1.150716619516839, -1.383089490820648, -1.104761675940863, -1.068128468059739, -0.75568606279048,
           -0.195865655115413, -1.909676658426125, -0.655280937297904, 0.596307078067343,  1.696291364586209,
           0.87862749301768,   1.034118426983674,  1.047691853998995,  0.924631646790629});
  Tensor dx_want =
      f64({1.31143013194096,   0.680632679468331,  0.069134390075328,  -0.456798434890424, 1.04872651325293,
           0.733594625659791,  0.510604396085113,  0.375900467636111,  0.059134065531194,  0.020282594549685,
           -0.011131765785642, -0.040571524574773, -0.129786324443843, -0.217929468983763, -0.450376878841348,
           -0.806306094325242, -0.459099257493587, -0.642303663728802, -0.766983804350533, -0.800439277061023,
           -0.16300357024986,  -0.076234799272556, 0.038291674410145,  0.173233325391807});
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "NCHW");
    Tensor x = (cl ? channels_last(wave_x()) : wave_x()).requires_grad_();
    Tensor y = batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5);
    Tensor dx = autograd::grad({y}, {x}, {wave_gy()})[0];
    EXPECT_CLOSE(y.contiguous().flatten(), y_want, Tolerance{1e-12, 1e-12});
    EXPECT_CLOSE(dx.contiguous().flatten(), dx_want, Tolerance{1e-12, 1e-12});
  }
}

TEST(BatchNormFused, ChannelsLastStaysChannelsLast) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    BnResult cl = run_bn(channels_last(wave_x()), channels_last(wave_gy()), training);
    EXPECT_TRUE(is_channels_last_dense(cl.y));
    EXPECT_TRUE(is_channels_last_dense(cl.dx));
    EXPECT_TRUE(cl.y.strides().equals(channels_last(wave_x()).strides()));
    expect_result(cl, training ? torch_training() : torch_eval(), Tolerance{1e-12, 1e-12});
    // A gradient in the other layout gives the same values.
    expect_result(run_bn(channels_last(wave_x()), wave_gy(), training),
                  training ? torch_training() : torch_eval(), Tolerance{1e-12, 1e-12});
  }
  // Larger channels-last input, against the same values in NCHW.
  Tensor x = random_tensor({4, 5, 3, 7}, kFloat64) * 3 + 1, gy = random_tensor({4, 5, 3, 7}, kFloat64);
  BnResult a = run_bn(x, gy, true), b = run_bn(channels_last(x), gy, true);
  expect_result(b, a, Tolerance{1e-12, 1e-12});
  // Other strided inputs are copied: the output is contiguous.
  Tensor strided = x.transpose(2, 3).contiguous().transpose(2, 3);
  EXPECT_TRUE(batch_norm(strided, {}, {}, {}, {}, true).is_contiguous());
}

TEST(BatchNormFused, ReducedPrecisionAgainstFloat64) {
  Tensor x = random_tensor({6, 3, 5, 4}, kFloat64) + 2, gy = random_tensor({6, 3, 5, 4}, kFloat64);
  for (bool training : {true, false}) {
    for (bool cl : {false, true}) {
      SCOPED_TRACE(std::string(training ? "training " : "eval ") + (cl ? "channels-last" : "NCHW"));
      Tensor xb = x.to(kBFloat16);
      BnResult ref = run_bn(xb.to(kFloat64), gy, training);
      // bfloat16 input with float32 parameters and running stats (mixed precision), and with all
      // of them in bfloat16.
      for (ScalarType pd : {kFloat32, kBFloat16}) {
        BnResult got = run_bn(cl ? channels_last(xb) : xb, gy, training, pd, pd);
        EXPECT_EQ(got.y.dtype(), kBFloat16);
        EXPECT_EQ(got.dx.dtype(), kBFloat16);
        EXPECT_EQ(got.dw.dtype(), pd);
        EXPECT_EQ(got.db.dtype(), pd);
        EXPECT_EQ(is_channels_last_dense(got.y), cl);
        Tolerance tol{2e-2, 2e-2};
        EXPECT_CLOSE(got.y.to(kFloat64), ref.y, tol);
        EXPECT_CLOSE(got.dx.to(kFloat64), ref.dx, tol);
        EXPECT_CLOSE(got.dw.to(kFloat64), ref.dw, Tolerance{2e-2, 0.1});
        EXPECT_CLOSE(got.db.to(kFloat64), ref.db, Tolerance{2e-2, 0.1});
        EXPECT_CLOSE(got.rm.to(kFloat64), ref.rm, tol);
        EXPECT_CLOSE(got.rv.to(kFloat64), ref.rv, tol);
      }
    }
  }
}

TEST(BatchNormFused, FusedBackwardMatchesTheCompositeFormula) {
  // create_graph takes the composite formula (built from ember ops); the plain backward the
  // fused kernels.
  Tensor x = random_tensor({3, 4, 2, 5}, kFloat64) * 2 - 1, gy = random_tensor({3, 4, 2, 5}, kFloat64);
  for (bool training : {true, false}) {
    for (bool cl : {false, true}) {
      SCOPED_TRACE(std::string(training ? "training " : "eval ") + (cl ? "channels-last" : "NCHW"));
      Tensor xi = cl ? channels_last(x) : x;
      BnResult fused = run_bn(xi, gy, training);
      BnResult composite = run_bn(xi, gy, training, kFloat64, kFloat64, /*create_graph=*/true);
      EXPECT_TRUE(composite.dx.requires_grad());
      expect_result(fused, composite, Tolerance{1e-12, 1e-12});
    }
  }
  // Only some gradients wanted: x alone, weight alone, bias alone.
  Tensor xl = x.clone().requires_grad_(), w = random_tensor({4}, kFloat64).requires_grad_(),
         b = random_tensor({4}, kFloat64).requires_grad_();
  Tensor y = batch_norm(xl, {}, {}, w, b, true);
  auto all = autograd::grad({y}, {xl, w, b}, {gy}, true);
  EXPECT_CLOSE(autograd::grad({y}, {xl}, {gy}, true)[0], all[0]);
  EXPECT_CLOSE(autograd::grad({y}, {w}, {gy}, true)[0], all[1]);
  EXPECT_CLOSE(autograd::grad({y}, {b}, {gy}, true)[0], all[2]);
  // db is the sum of gy; the gradient of x sums to zero per channel.
  EXPECT_CLOSE(all[2], gy.sum({0, 2, 3}));
  EXPECT_CLOSE(all[0].sum({0, 2, 3}), zeros({4}, kFloat64), Tolerance{0, 1e-12});
}

TEST(BatchNormFused, GradcheckAndGradgradcheckChannelsLast) {
  for (bool training : {true, false}) {
    auto fn = [training](const std::vector<Tensor>& in) {
      Tensor rm = tensor({0.5, -1.0, 0.2}, kFloat64), rv = tensor({2.0, 0.5, 1.5}, kFloat64);
      return batch_norm(channels_last(in[0]), rm, rv, in[1], in[2], training, 0.1, 1e-3);
    };
    std::vector<Tensor> in = {random_tensor({2, 3, 2, 3}, kFloat64).requires_grad_(),
                              random_tensor({3}, kFloat64).requires_grad_(),
                              random_tensor({3}, kFloat64).requires_grad_()};
    EXPECT_TRUE(autograd::gradcheck(fn, in));
    EXPECT_TRUE(autograd::gradgradcheck(fn, in));
  }
}

TEST(BatchNormFused, EmptyBatchGivesZeroParamGradients) {
  Tensor x = empty({0, 3, 2, 2}, kFloat64).requires_grad_();
  Tensor w = ones({3}, kFloat64).requires_grad_(), b = zeros({3}, kFloat64).requires_grad_();
  Tensor y = batch_norm(x, tensor({0.0, 0.0, 0.0}, kFloat64), tensor({1.0, 1.0, 1.0}, kFloat64), w, b, false);
  auto g = autograd::grad({y}, {x, w, b}, {empty({0, 3, 2, 2}, kFloat64)});
  EXPECT_EQ(g[0].numel(), 0);
  EXPECT_CLOSE(g[1], zeros({3}, kFloat64));
  EXPECT_CLOSE(g[2], zeros({3}, kFloat64));
}

}  // namespace
}  // namespace ember::testing
