// CUDA kernels of the fused optimizer steps, through multi_tensor_apply (cuda/multi_tensor_apply.cuh).
// The math is fused_optim_functors.h's.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ember/core/ops/fused_optim.h"
#include "ember/core/ops/fused_optim_functors.h"
#include "ember/cuda/launch.cuh"
#include "ember/cuda/multi_tensor_apply.cuh"

namespace ember::cuda {
namespace {

using mta::multi_tensor_apply;

// What both steps share: a launch with found_inf set does nothing, the gradients (list 1) are
// stored back only when grad_scale unscales them, and the rate is read from lr when given.
struct GradScaling {
  const float* grad_scale;
  const float* found_inf;
  const double* lr;
  __device__ bool skip() const { return found_inf && *found_inf != 0; }
  __device__ bool stores(int d) const { return d != 1 || grad_scale; }
  template <class Args>
  __device__ Args with_lr(Args args) const {
    if (lr) args.lr = *lr;
    return args;
  }
};

// List 0 is the params, list 1 the grads, then the state.
template <class S>
struct AdamOp : GradScaling {
  static constexpr int kDepth = 5;
  using T = ops::OptimMath<S>;
  FusedAdamArgs args;

  struct PerTensor {
    ops::AdamUpdate<T> update;
    T scale;
  };
  __device__ PerTensor per_tensor(const float* step) const {
    return {ops::AdamUpdate<T>(with_lr(args), *step), grad_scale ? static_cast<T>(*grad_scale) : T(1)};
  }
  __device__ void operator()(const PerTensor& c, S (&e)[kDepth]) const {
    T param = e[0], g = e[1], exp_avg = e[2], exp_avg_sq = e[3], max_exp_avg_sq = e[4];
    if (grad_scale) e[1] = static_cast<S>(g = g / c.scale);
    c.update(param, g, exp_avg, exp_avg_sq, max_exp_avg_sq);
    e[0] = static_cast<S>(param);
    e[2] = static_cast<S>(exp_avg);
    e[3] = static_cast<S>(exp_avg_sq);
    e[4] = static_cast<S>(max_exp_avg_sq);
  }
};

template <class S>
struct SgdOp : GradScaling {
  static constexpr int kDepth = 3;
  using T = ops::OptimMath<S>;
  FusedSgdArgs args;

  struct PerTensor {
    ops::SgdUpdate<T> update;
    T scale;
  };
  __device__ PerTensor per_tensor(const float*) const {
    return {ops::SgdUpdate<T>(with_lr(args)), grad_scale ? static_cast<T>(*grad_scale) : T(1)};
  }
  __device__ void operator()(const PerTensor& c, S (&e)[kDepth]) const {
    T param = e[0], g = e[1], buf = e[2];
    if (grad_scale) e[1] = static_cast<S>(g = g / c.scale);
    c.update(param, g, buf);
    e[0] = static_cast<S>(param);
    e[2] = static_cast<S>(buf);
  }
};

// Adam's step counts += 1 unless found_inf is set, before the update reads them.
constexpr int kMaxSteps = 448;
struct StepList {
  float* steps[kMaxSteps];
};

__global__ void increment_steps_kernel(StepList list, int n, const float* found_inf) {
  if (threadIdx.x < n && !(found_inf && *found_inf != 0)) *list.steps[threadIdx.x] += 1;
}

void increment_steps(ArrayRef<Tensor> steps, const float* found_inf, cudaStream_t stream) {
  StepList list;
  for (size_t b = 0; b < steps.size(); b += kMaxSteps) {
    int n = static_cast<int>(std::min<size_t>(kMaxSteps, steps.size() - b));
    for (int i = 0; i < n; ++i) list.steps[i] = steps[b + i].data_ptr<float>();
    increment_steps_kernel<<<1, kMaxSteps, 0, stream>>>(list, n, found_inf);
    EMBER_CUDA_LAUNCH_CHECK();
  }
}

// f(C{}) for the dtype of the param copies (float16 or bfloat16), f(void_tag) without any: the
// frontend allows copies only of float32 params.
struct NoCopies {};
template <class F>
void visit_copy_dtype(ArrayRef<Tensor> copies, F&& f) {
  auto first = std::find_if(copies.begin(), copies.end(), [](const Tensor& t) { return t.defined(); });
  if (first == copies.end()) return f(NoCopies{});
  if (first->dtype() == kBFloat16) return f(BFloat16{});
  f(Half{});
}

// multi_tensor_apply for Op over lists of S, writing the param copies when there are any.
template <class S, class Op>
void apply_with_copies(const std::vector<ArrayRef<Tensor>>& lists, ArrayRef<Tensor> steps, const Op& op,
                       ArrayRef<Tensor> copies, cudaStream_t stream) {
  visit_copy_dtype(copies, [&](auto ctag) {
    using C = decltype(ctag);
    // Copies are only of float32 params (the frontend checks): other dtypes never take them.
    if constexpr (std::is_same_v<C, NoCopies> || !std::is_same_v<S, float>)
      multi_tensor_apply<S>(lists, steps, op, stream);
    else
      multi_tensor_apply<S, Op, C>(lists, steps, op, stream, copies);
  });
}

const float* optional_ptr(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }
const double* optional_lr(const Tensor& t) { return t.defined() ? t.data_ptr<double>() : nullptr; }

void fused_adam_cuda(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                     ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs,
                     ArrayRef<Tensor> state_steps, const FusedAdamArgs& args, const Tensor& grad_scale,
                     const Tensor& found_inf, const Tensor& lr, ArrayRef<Tensor> param_copies) {
  cudaStream_t stream = current_stream(params[0].device().index);
  increment_steps(state_steps, optional_ptr(found_inf), stream);
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    AdamOp<S> op{{optional_ptr(grad_scale), optional_ptr(found_inf), optional_lr(lr)}, args};
    apply_with_copies<S>({params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs}, state_steps, op,
                         param_copies, stream);
  });
}

void fused_sgd_cuda(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> momentum_buffers,
                    const FusedSgdArgs& args, const Tensor& grad_scale, const Tensor& found_inf,
                    const Tensor& lr, ArrayRef<Tensor> param_copies) {
  cudaStream_t stream = current_stream(params[0].device().index);
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    SgdOp<S> op{{optional_ptr(grad_scale), optional_ptr(found_inf), optional_lr(lr)}, args};
    apply_with_copies<S>({params, grads, momentum_buffers}, {}, op, param_copies, stream);
  });
}

KernelRegistrar<FusedAdamFn> adam_reg(fused_adam_stub, kCUDA, &fused_adam_cuda);
KernelRegistrar<FusedSgdFn> sgd_reg(fused_sgd_stub, kCUDA, &fused_sgd_cuda);

}  // namespace
}  // namespace ember::cuda
