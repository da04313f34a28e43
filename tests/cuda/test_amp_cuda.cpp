// Autocast on CUDA tensors, and the GradScaler on CUDA: its fused path never waits for the
// device (the stream is held at a host function while step() and update() run), skipped steps,
// and the same scale sequence and parameters as the CPU run. The two amp ops run against the
// CPU through the op table (OpTableCuda._amp_*).
#include <ember/core/autocast_mode.h>
#include <ember/core/profiler.h>
#include <ember/cuda/stream.h>
#include <ember/nn/flatten_parameters.h>
#include <ember/optim/adam.h>
#include <ember/optim/grad_scaler.h>

#include <cmath>

#include "cuda_test_util.h"
#include "host_gate.h"

namespace ember::testing {
namespace {

class AmpCuda : public CudaTest {};

const Device kGpu(kCUDA, 0);

TEST_F(AmpCuda, AutocastPolicies) {
  Tensor a = random_tensor({4, 4}, kFloat32).to(kGpu);
  {
    amp::AutocastGuard autocast(kCUDA);  // float16 by default
    EXPECT_EQ(mm(a, a).dtype(), kFloat16);
    EXPECT_EQ(softmax(mm(a, a), 1).dtype(), kFloat32);
    EXPECT_EQ(mm(a.cpu(), a.cpu()).dtype(), kFloat32);  // CPU tensors: CPU autocast is off
  }
  {
    amp::AutocastGuard autocast(kCUDA, kBFloat16);
    Tensor expected = mm(a.to(kBFloat16), a.to(kBFloat16));
    EXPECT_CLOSE(mm(a, a), expected, Tolerance{0, 0});
  }
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
}

// Under autocast, a linear's float32 weight and bias get float32 gradients from the product
// itself: within float32 accumulation error of the float64 gradients of the same reduced-precision
// operands, far inside the bf16/f16 rounding that a cast back would add. Output and input gradient
// as the product of the casts. 1031 features take the unfused and split paths (and padded output
// rows), 256 the fused bias-gradient epilogue.
TEST_F(AmpCuda, LinearGradientsOfFloat32ParametersComeOutInFloat32) {
  for (ScalarType dt : {kBFloat16, kFloat16})
    for (int64_t features : {1031, 256}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " " + std::to_string(features));
      manual_seed(7);
      nn::Linear lin(96, features);
      lin->to(kGpu);
      Tensor x = random_tensor({4, 8, 96}, kFloat32).to(kGpu).requires_grad_();
      Tensor gy = random_tensor({4, 8, features}, dt).to(kGpu);
      Tensor y;
      {
        amp::AutocastGuard autocast(kCUDA, dt);
        y = lin(x);
      }
      ASSERT_EQ(y.dtype(), dt);
      y.backward(gy);
      ASSERT_EQ(lin->weight.grad().dtype(), kFloat32);
      ASSERT_EQ(lin->bias.grad().dtype(), kFloat32);
      auto f64 = [&](const Tensor& t) { return t.detach().to(dt).cpu().to(kFloat64); };
      Tensor x2 = f64(x).reshape({32, 96}), g2 = f64(gy).reshape({32, features}), w = f64(lin->weight);
      auto rel_err = [](const Tensor& got, const Tensor& ref) {
        return (got.cpu().to(kFloat64) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
      };
      EXPECT_LT(rel_err(lin->weight.grad(), g2.t().mm(x2)), 1e-5);
      EXPECT_LT(rel_err(lin->bias.grad(), g2.sum({0})), 1e-5);
      EXPECT_LT(rel_err(y.reshape({32, features}), x2.mm(w.t()) + f64(lin->bias)), 1e-2);
      EXPECT_LT(rel_err(x.grad().reshape({32, 96}), g2.mm(w)), 1e-2);
    }
}

// w [n] on `device`; loss = sum(w * x) scaled, `inf` poisons the gradient.
struct ScaledRun {
  Tensor w, x;
  optim::Adam opt;
  amp::GradScaler scaler;
  ScaledRun(Device device, const Tensor& w0, const Tensor& x0)
      : w(w0.to(device, /*non_blocking=*/false, /*copy=*/true).requires_grad_()),
        x(x0.to(device)),
        opt({w}, optim::AdamOptions(0.1).fused(true)),
        scaler(1024.0, 2.0, 0.5, 2) {}
  void backward(bool inf) {
    opt.zero_grad();
    scaler.scale(sum(w * x)).backward();
    if (inf) w.grad().fill_(INFINITY);
  }
  void step() {
    scaler.step(opt);
    scaler.update();
  }
};

// Parameters in one buffer (nn::utils::flatten_parameters_): under bf16 autocast the buffer is cast
// by one kernel instead of four, and a fused-AdamW step gives the same outputs, gradients and
// parameters bit for bit. From the third step on neither casts a parameter: the fused steps write
// autocast's kept casts (core/autocast_mode.h), and the training stays the same bit for bit.
TEST_F(AmpCuda, FlattenedAndKeptParameterCastsTrainAsBefore) {
  auto make = [] {
    manual_seed(5);
    nn::Sequential net(nn::Linear(64, 128), nn::LayerNorm(nn::LayerNormOptions({128})), nn::ReLU(),
                       nn::Linear(128, 32));
    net->to(kGpu);
    return net;
  };
  nn::Sequential plain = make(), flat = make();
  nn::utils::flatten_parameters_(flat->parameters());
  optim::AdamW plain_opt(plain->parameters(), optim::AdamWOptions(1e-2).fused(true)),
      flat_opt(flat->parameters(), optim::AdamWOptions(1e-2).fused(true));
  auto forward = [](nn::Sequential& net, const Tensor& x, int64_t* casts) {
    profiler::Profile prof({profiler::ProfilerActivity::CPU});
    Tensor out;
    {
      amp::AutocastGuard autocast(kCUDA, kBFloat16);
      out = net->forward(x);
    }
    prof.stop();
    const profiler::KeyAverages calls = prof.key_averages();
    const profiler::FunctionEventAvg* copies = calls.find("copy_");
    *casts = copies ? copies->count : 0;
    return out;
  };
  int64_t activation_casts = 0;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    Tensor x = random_tensor({16, 64}, kFloat32).to(kGpu), y = random_tensor({16, 32}, kFloat32).to(kGpu);
    int64_t plain_casts = 0, flat_casts = 0;
    Tensor a = forward(plain, x, &plain_casts), b = forward(flat, x, &flat_casts);
    // Four parameter casts, or one of the whole buffer, in the first step; then none: its fused step
    // asks for kept casts, the checks below make them (as the next forward would) and each fused
    // step writes them.
    if (step == 0) {
      EXPECT_EQ(plain_casts - flat_casts, 3);
      activation_casts = flat_casts - 1;
    } else {
      EXPECT_EQ(plain_casts, activation_casts);
      EXPECT_EQ(flat_casts, activation_casts);
    }
    EXPECT_CLOSE(b.to(kFloat32), a.to(kFloat32), Tolerance{0, 0});
    plain_opt.zero_grad();
    flat_opt.zero_grad();
    mse_loss(a.to(kFloat32), y).backward();
    mse_loss(b.to(kFloat32), y).backward();
    plain_opt.step();
    flat_opt.step();
    std::vector<Tensor> pp = plain->parameters(), fp = flat->parameters();
    for (size_t i = 0; i < pp.size(); ++i) {
      EXPECT_CLOSE(fp[i], pp[i], Tolerance{0, 0});
      amp::AutocastGuard autocast(kCUDA, kBFloat16);  // what the next step's forward will use
      EXPECT_TRUE(amp::detail::cast(pp[i], kCUDA, kBFloat16).equal(pp[i].detach().to(kBFloat16)));
      EXPECT_TRUE(amp::detail::cast(fp[i], kCUDA, kBFloat16).equal(fp[i].detach().to(kBFloat16)));
    }
  }
}

TEST_F(AmpCuda, FusedStepMatchesCpuAndSkipsOnInf) {
  manual_seed(3);
  Tensor w0 = random_tensor({1000}, kFloat32), x0 = random_tensor({1000}, kFloat32);
  ScaledRun cpu(kCPU, w0, x0), gpu(kGpu, w0, x0);
  for (bool inf : {false, false, true, false, true, false, false}) {
    SCOPED_TRACE(inf ? "inf step" : "clean step");
    Tensor before = gpu.w.detach().cpu();
    for (ScaledRun* r : {&cpu, &gpu}) {
      r->backward(inf);
      r->step();
    }
    EXPECT_EQ(gpu.scaler.get_scale(), cpu.scaler.get_scale());
    EXPECT_TRUE(assert_close(gpu.w.detach().cpu(), cpu.w.detach(), cuda_tolerance(kFloat32)));
    if (inf) {
      EXPECT_TRUE(assert_close(gpu.w.detach().cpu(), before, Tolerance{0, 0}));
    }
  }
  // growth_interval 2: 1024, 2048, 1024 (inf), 1024, 512 (inf), 512, 1024.
  EXPECT_EQ(gpu.scaler.get_scale(), 1024.0);
}

TEST_F(AmpCuda, FusedStepAndUpdateDoNotSync) {
  manual_seed(4);
  ScaledRun r(kGpu, random_tensor({4096}, kFloat32), random_tensor({4096}, kFloat32));
  // Warm-up of both paths: state, scale and cached blocks exist, and every kernel is loaded (CUDA
  // loads modules lazily, and a first load may wait for the device).
  for (bool unscale_first : {false, true}) {
    r.backward(false);
    if (unscale_first) r.scaler.unscale_(r.opt);
    r.step();
  }
  for (bool unscale_first : {false, true}) {
    SCOPED_TRACE(unscale_first ? "after unscale_" : "plain");
    r.backward(false);
    cuda::synchronize(0);
    EXPECT_TRUE(returns_without_waiting(cuda::current_stream(0), [&] {
      if (unscale_first) r.scaler.unscale_(r.opt);
      r.step();
    })) << "step()/update() waited for the device";
    cuda::synchronize(0);
  }
}

}  // namespace
}  // namespace ember::testing
