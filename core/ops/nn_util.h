#pragma once

// Frontend checks the nn op families (softmax, normalization, loss, attention) share.

#include "ember/core/tensor.h"

namespace ember::nn_detail {

// The dtype nn kernels compute and keep statistics in: float64 stays, other floats use float32.
inline ScalarType compute_dtype(ScalarType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

inline void check_floating(const char* op, const Tensor& t, const char* what) {
  EMBER_CHECK(t.is_floating_point(), op, ": expected ", what,
              " to be a floating point tensor, got ", t.dtype());
}

inline void check_same_device(const char* op, const Tensor& ref, const Tensor& t,
                              const char* what) {
  EMBER_CHECK(t.device() == ref.device(), op,
              ": expected all tensors to be on the same device, but ", what, " is on ", t.device(),
              " and the input on ", ref.device());
}

// Whether a tensor of shape `from` broadcasts to exactly `to`.
inline bool broadcasts_to(IntArrayRef from, IntArrayRef to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

// Checks an optional per-feature tensor (a norm's weight, a running stat, a loss's class
// weight): same device as `input`, floating, of shape `shape`. Undefined passes.
inline void check_param(const char* op, const Tensor& p, const char* what, IntArrayRef shape,
                        const Tensor& input) {
  if (!p.defined()) return;
  check_same_device(op, input, p, what);
  check_floating(op, p, what);
  EMBER_CHECK(p.sizes().equals(shape), op, ": expected ", what, " of shape ", shape, ", got ",
              p.sizes());
}

// check_param, then the tensor contiguous in the compute dtype `cd` (undefined stays undefined).
inline Tensor param_as(const char* op, const Tensor& p, const char* what, IntArrayRef shape,
                       const Tensor& input, ScalarType cd) {
  check_param(op, p, what, shape, input);
  return p.defined() ? p.to(cd).contiguous() : p;
}

}  // namespace ember::nn_detail
