// The CUDA fused optimizer steps against the CPU ones, on lists that need several launches:
// more tensors than one launch takes, a tensor whose chunks span two launches, empty and
// misaligned tensors (the scalar path), and grad_scale/found_inf read on the device.
#include "cuda_test_util.h"

namespace ember::testing {
namespace {

class FusedOptimCuda : public CudaTest {};

// 100 tensors of assorted sizes, empty ones, a 0-dim one, and one of more than 320 chunks of
// 65536 elements.
std::vector<DimVector> many_shapes() {
  std::vector<DimVector> shapes;
  for (int64_t i = 0; i < 100; ++i) shapes.push_back({(i * 373) % 5000});
  shapes.push_back({});
  shapes.push_back({3, 0});
  shapes.push_back({320 * 65536 + 12345});
  shapes.push_back({65537});
  return shapes;
}

std::vector<Tensor> random_list(const std::vector<DimVector>& shapes, ScalarType dt, double low,
                                double high) {
  std::vector<Tensor> out;
  for (const DimVector& s : shapes) out.push_back(random_tensor(s, dt, low, high));
  return out;
}

// Contiguous copies on `device`; with `misalign`, each starts one element into a larger buffer.
std::vector<Tensor> on(const std::vector<Tensor>& ts, Device device, bool misalign = false) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    if (!misalign || t.dim() != 1) {
      out.push_back(t.to(device, /*non_blocking=*/false, /*copy=*/true));
      continue;
    }
    Tensor buf = zeros({t.numel() + 1}, TensorOptions(t.dtype()).device(device));
    Tensor view = buf.narrow(0, 1, t.numel());
    view.copy_(t);
    out.push_back(view);
  }
  return out;
}

std::vector<Tensor> steps_on(size_t n, Device device) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(full({}, static_cast<double>(i % 7), TensorOptions(kFloat32).device(device)));
  return out;
}

void expect_close_lists(const std::vector<Tensor>& cuda, const std::vector<Tensor>& cpu) {
  ASSERT_EQ(cuda.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(cuda[i].is_cuda());
    EXPECT_TRUE(assert_close(cuda[i].cpu(), cpu[i], cuda_tolerance(cpu[i].dtype()))) << "tensor " << i;
  }
}

TEST_F(FusedOptimCuda, AdamMatchesTheCpu) {
  const std::vector<DimVector> shapes = many_shapes();
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    for (bool misalign : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (misalign ? " misaligned" : ""));
      manual_seed(1);
      std::vector<Tensor> p = random_list(shapes, dt, -2, 2), g = random_list(shapes, dt, -2, 2),
                          m = random_list(shapes, dt, -1, 1), v = random_list(shapes, dt, 0.5, 2),
                          vmax = random_list(shapes, dt, 0.5, 2);
      std::vector<Tensor> cp = on(p, kCUDA, misalign), cg = on(g, kCUDA, misalign),
                          cm = on(m, kCUDA, misalign), cv = on(v, kCUDA, misalign),
                          cvmax = on(vmax, kCUDA, misalign);
      std::vector<Tensor> steps = steps_on(shapes.size(), kCPU), csteps = steps_on(shapes.size(), kCUDA);
      FusedAdamArgs a{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .decoupled_weight_decay = true};
      fused_adam_(p, g, m, v, vmax, steps, a);
      fused_adam_(cp, cg, cm, cv, cvmax, csteps, a);
      expect_close_lists(cp, p);
      expect_close_lists(cm, m);
      expect_close_lists(cv, v);
      expect_close_lists(cvmax, vmax);
      expect_close_lists(csteps, steps);
    }
  }
}

TEST_F(FusedOptimCuda, SgdMatchesTheCpu) {
  const std::vector<DimVector> shapes = many_shapes();
  for (bool first : {false, true}) {
    manual_seed(2);
    std::vector<Tensor> p = random_list(shapes, kFloat32, -2, 2), g = random_list(shapes, kFloat32, -2, 2),
                        buf = random_list(shapes, kFloat32, -1, 1);
    std::vector<Tensor> cp = on(p, kCUDA), cg = on(g, kCUDA), cbuf = on(buf, kCUDA);
    FusedSgdArgs a{
        .lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true, .is_first_step = first};
    fused_sgd_(p, g, buf, a);
    fused_sgd_(cp, cg, cbuf, a);
    expect_close_lists(cp, p);
    expect_close_lists(cbuf, buf);
  }
}

// The param copies (autocast's kept casts) written in the same pass: each is its param's new value
// as .to(dtype) makes it, aligned or not (the scalar path), on lists of several launches.
TEST_F(FusedOptimCuda, ParamCopiesAreTheCastsOfTheNewValues) {
  const std::vector<DimVector> shapes = many_shapes();
  for (ScalarType dt : {kBFloat16, kFloat16}) {
    for (bool misalign : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (misalign ? " misaligned" : ""));
      manual_seed(5);
      std::vector<Tensor> p = random_list(shapes, kFloat32, -2, 2), g = random_list(shapes, kFloat32, -2, 2),
                          m = random_list(shapes, kFloat32, -1, 1), v = random_list(shapes, kFloat32, 0.5, 2);
      std::vector<Tensor> cp = on(p, kCUDA, misalign), cg = on(g, kCUDA), cm = on(m, kCUDA),
                          cv = on(v, kCUDA);
      std::vector<Tensor> copies;
      for (const Tensor& t : p) copies.push_back(t.to(dt));
      copies = on(copies, kCUDA, misalign);
      copies[3] = Tensor();  // a param without a copy
      const Tensor none;
      const FusedAdamArgs a{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true};
      fused_adam_(p, g, m, v, {}, steps_on(shapes.size(), kCPU), a);
      fused_adam_(cp, cg, cm, cv, {}, steps_on(shapes.size(), kCUDA), a, none, none, none, copies);
      expect_close_lists(cp, p);
      fused_sgd_(cp, cg, cm, {.lr = 0.1, .momentum = 0.9}, none, none, none, copies);
      for (size_t i = 0; i < copies.size(); ++i)
        if (copies[i].defined()) {
          EXPECT_TRUE(copies[i].equal(cp[i].to(dt))) << "copy " << i;
        }
    }
  }
}

// Nothing moves to the host: the scale divides the gradients (stored back unscaled) and a set
// found_inf skips the whole step, step counts included.
TEST_F(FusedOptimCuda, GradScaleAndFoundInfOnTheDevice) {
  manual_seed(3);
  const std::vector<DimVector> shapes = {{1000}, {7, 9}};
  std::vector<Tensor> p = random_list(shapes, kFloat32, -2, 2), g = random_list(shapes, kFloat32, -2, 2),
                      m = random_list(shapes, kFloat32, -1, 1), v = random_list(shapes, kFloat32, 0.5, 2);
  std::vector<Tensor> cp = on(p, kCUDA), cg = on(g, kCUDA), cm = on(m, kCUDA), cv = on(v, kCUDA);
  std::vector<Tensor> steps = steps_on(2, kCPU), csteps = steps_on(2, kCUDA);
  const Tensor scale = full({}, 8.0, TensorOptions(kFloat32).device(kCUDA));
  std::vector<Tensor> scaled;
  for (const Tensor& t : cg) scaled.push_back(t * 8);
  fused_adam_(cp, scaled, cm, cv, {}, csteps, {}, scale,
              full({}, 1.0, TensorOptions(kFloat32).device(kCUDA)));
  expect_close_lists(cp, p);
  expect_close_lists(csteps, steps);
  fused_adam_(p, g, m, v, {}, steps, {});
  fused_adam_(cp, scaled, cm, cv, {}, csteps, {}, scale,
              full({}, 0.0, TensorOptions(kFloat32).device(kCUDA)));
  expect_close_lists(cp, p);
  expect_close_lists(scaled, g);
  expect_close_lists(csteps, steps);
}

// On CUDA the optimizers take the fused step unless told otherwise; both agree with the CPU.
TEST_F(FusedOptimCuda, OptimizersDefaultToTheFusedStep) {
  for (std::optional<bool> fused : {std::optional<bool>(), std::optional<bool>(false)}) {
    manual_seed(4);
    std::vector<Tensor> start = random_list({{4, 5}, {3}}, kFloat32, -2, 2);
    std::vector<Tensor> cpu = on(start, Device(kCPU)), cuda = on(start, Device(kCUDA));
    for (const Tensor& t : cpu) t.requires_grad_();
    for (const Tensor& t : cuda) t.requires_grad_();
    optim::AdamW cpu_opt(cpu, optim::AdamWOptions(0.1).amsgrad(true));
    optim::AdamW cuda_opt(cuda, optim::AdamWOptions(0.1).amsgrad(true).fused(fused));
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> grads = random_list({{4, 5}, {3}}, kFloat32, -1, 1);
      for (size_t i = 0; i < grads.size(); ++i) {
        cpu[i].set_grad(grads[i]);
        cuda[i].set_grad(grads[i].cuda());
      }
      cpu_opt.step();
      cuda_opt.step();
    }
    expect_close_lists(cuda, cpu);
    const Tensor& step = cuda_opt.state().at(cuda[0].unsafe_impl()).step;
    EXPECT_EQ(step.is_cuda(), !fused.has_value()) << "the fused step keeps the step count on the device";
  }
}

}  // namespace
}  // namespace ember::testing
