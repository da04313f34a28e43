// Autocast on CUDA tensors, and the GradScaler on CUDA: its fused path never waits for the
// device (the stream is held at a host function while step() and update() run), skipped steps,
// and the same scale sequence and parameters as the CPU run. The two amp ops run against the
// CPU through the op table (OpTableCuda._amp_*).
#include <ember/core/autocast_mode.h>
#include <ember/cuda/stream.h>
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
