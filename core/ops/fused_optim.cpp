// Frontends of the fused optimizer steps: every list checked here, so the kernels may assume one
// device, one dtype, matching shapes and dense memory laid out alike (walked as flat arrays).
#include "ember/core/ops/fused_optim.h"

#include <algorithm>
#include <optional>

#include "ember/core/autograd_meta.h"
#include "ember/core/op_range.h"
#include "ember/core/op_registry.h"

namespace ember {

DispatchStub<FusedAdamFn> fused_adam_stub("fused_adam_");
DispatchStub<FusedSgdFn> fused_sgd_stub("fused_sgd_");

namespace {

const OpRegistrar registrar({
    {"fused_adam_", AutocastPolicy::None, false},
    {"fused_sgd_", AutocastPolicy::None, false},
});

// A one-element tensor of `dtype` on `device` (a step count, grad_scale, found_inf, lr), or
// undefined when `optional`.
void check_scalar(const char* op, const char* what, const Tensor& t, Device device, bool optional,
                  ScalarType dtype = kFloat32) {
  if (optional && !t.defined()) return;
  EMBER_CHECK(t.defined(), op, ": ", what, " is undefined");
  EMBER_CHECK(t.dtype() == dtype && t.numel() == 1, op, ": ", what, " must be a ", dtype,
              " tensor with one element, got ", t.dtype(), " of shape ", t.sizes());
  EMBER_CHECK(t.device() == device, op, ": ", what, " is on ", t.device(), ", the params on ", device);
}

// list[i] (of the list named `what`) has params[i]'s shape, device and dense layout (contiguous, or
// channels-last params and all their state), and its dtype unless a copy's.
void check_like(const char* op, const char* what, size_t i, const Tensor& t, const Tensor& p,
                bool same_dtype) {
  EMBER_CHECK(t.sizes().equals(p.sizes()), op, ": ", what, "[", i, "] has shape ", t.sizes(), ", params[", i,
              "] has shape ", p.sizes());
  EMBER_CHECK(!same_dtype || t.dtype() == p.dtype(), op, ": ", what, "[", i, "] has dtype ", t.dtype(),
              ", params[", i, "] has dtype ", p.dtype());
  EMBER_CHECK(t.device() == p.device(), op, ": ", what, "[", i, "] is on ", t.device(), ", params[", i,
              "] on ", p.device());
  EMBER_CHECK(same_dense_layout(t, p), op, ": ", what, "[", i, "] (shape ", t.sizes(), ", strides ",
              t.strides(), ") must be contiguous, or dense with the strides of params[", i, "] ",
              p.strides());
}

// `list` (named `what`) holds one tensor per param, like it (check_like).
void check_list(const char* op, const char* what, ArrayRef<Tensor> list, ArrayRef<Tensor> params) {
  EMBER_CHECK(list.size() == params.size(), op, ": ", what, " has ", list.size(), " tensors, params has ",
              params.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EMBER_CHECK(list[i].defined(), op, ": ", what, "[", i, "] is undefined");
    check_like(op, what, i, list[i], params[i], true);
  }
}

// param_copies: empty, or one per param, each undefined or a float16 or bfloat16 copy (one dtype
// for all) of a float32 param, like it but for the dtype.
void check_copies(const char* op, ArrayRef<Tensor> copies, ArrayRef<Tensor> params) {
  if (copies.empty()) return;
  EMBER_CHECK(copies.size() == params.size(), op, ": param_copies has ", copies.size(),
              " tensors, params has ", params.size());
  std::optional<ScalarType> dtype;
  for (size_t i = 0; i < copies.size(); ++i) {
    const Tensor& c = copies[i];
    if (!c.defined()) continue;
    EMBER_CHECK(params[i].dtype() == kFloat32, op, ": param_copies are of float32 params, params[", i,
                "] is ", params[i].dtype());
    EMBER_CHECK(is_reduced_float(c.dtype()) && (!dtype || c.dtype() == *dtype), op,
                ": param_copies must be all float16 or all bfloat16, param_copies[", i, "] is ", c.dtype());
    dtype = c.dtype();
    check_like(op, "param_copies", i, c, params[i], false);
    check_inplace(op, {c});
  }
}

void check_params(const char* op, ArrayRef<Tensor> params) {
  for (size_t i = 0; i < params.size(); ++i) {
    EMBER_CHECK(params[i].defined(), op, ": params[", i, "] is undefined");
    EMBER_CHECK(params[i].is_floating_point(), op, ": params must be floating point, params[", i, "] is ",
                params[i].dtype());
    EMBER_CHECK(params[i].dtype() == params[0].dtype() && params[i].device() == params[0].device(), op,
                ": all params must share one dtype and device, params[0] is ", params[0].dtype(), " on ",
                params[0].device(), ", params[", i, "] is ", params[i].dtype(), " on ", params[i].device());
    check_inplace(op, {params[i]});
  }
  check_list(op, "params", params, params);
}

void bump_versions(ArrayRef<Tensor> list) {
  for (const Tensor& t : list)
    if (t.defined()) t.bump_version();
}

}  // namespace

void fused_adam_(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                 ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs, ArrayRef<Tensor> state_steps,
                 const FusedAdamArgs& args, const Tensor& grad_scale, const Tensor& found_inf,
                 const Tensor& lr, ArrayRef<Tensor> param_copies) {
  detail::OpRange op_range("fused_adam_", params, grads);
  const char* op = "fused_adam_";
  if (params.empty()) return;
  check_params(op, params);
  check_list(op, "grads", grads, params);
  check_list(op, "exp_avgs", exp_avgs, params);
  check_list(op, "exp_avg_sqs", exp_avg_sqs, params);
  if (args.amsgrad)
    check_list(op, "max_exp_avg_sqs", max_exp_avg_sqs, params);
  else
    EMBER_CHECK(max_exp_avg_sqs.empty(), op, ": max_exp_avg_sqs must be empty without amsgrad, it has ",
                max_exp_avg_sqs.size(), " tensors");
  EMBER_CHECK(state_steps.size() == params.size(), op, ": state_steps has ", state_steps.size(),
              " tensors, params has ", params.size());
  Device device = params[0].device();
  for (const Tensor& s : state_steps) check_scalar(op, "each state step", s, device, false);
  check_scalar(op, "grad_scale", grad_scale, device, true);
  check_scalar(op, "found_inf", found_inf, device, true);
  check_scalar(op, "lr", lr, device, true, kFloat64);
  check_copies(op, param_copies, params);
  fused_adam_stub(device)(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, args,
                          grad_scale, found_inf, lr, param_copies);
  for (ArrayRef<Tensor> list : {params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, param_copies})
    bump_versions(list);
  if (grad_scale.defined()) bump_versions(grads);
}

void fused_sgd_(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> momentum_buffers,
                const FusedSgdArgs& args, const Tensor& grad_scale, const Tensor& found_inf, const Tensor& lr,
                ArrayRef<Tensor> param_copies) {
  detail::OpRange op_range("fused_sgd_", params, grads);
  const char* op = "fused_sgd_";
  if (params.empty()) return;
  check_params(op, params);
  check_list(op, "grads", grads, params);
  if (args.momentum != 0)
    check_list(op, "momentum_buffers", momentum_buffers, params);
  else
    EMBER_CHECK(momentum_buffers.empty(), op, ": momentum_buffers must be empty when momentum is 0, it has ",
                momentum_buffers.size(), " tensors");
  Device device = params[0].device();
  check_scalar(op, "grad_scale", grad_scale, device, true);
  check_scalar(op, "found_inf", found_inf, device, true);
  check_scalar(op, "lr", lr, device, true, kFloat64);
  check_copies(op, param_copies, params);
  fused_sgd_stub(device)(params, grads, momentum_buffers, args, grad_scale, found_inf, lr, param_copies);
  for (ArrayRef<Tensor> list : {params, momentum_buffers, param_copies}) bump_versions(list);
  if (grad_scale.defined()) bump_versions(grads);
}

std::vector<std::vector<size_t>> group_by_device_and_dtype(ArrayRef<Tensor> tensors) {
  std::vector<std::vector<size_t>> groups;
  std::vector<std::pair<Device, ScalarType>> keys;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::pair<Device, ScalarType> key(tensors[i].device(), tensors[i].dtype());
    size_t k = std::find(keys.begin(), keys.end(), key) - keys.begin();
    if (k == keys.size()) {
      keys.push_back(key);
      groups.emplace_back();
    }
    groups[k].push_back(i);
  }
  return groups;
}

}  // namespace ember
