#pragma once

// The host half of the CUDA elementwise launcher (cuda/elementwise.cuh): an output and its
// inputs broadcast to its shape, dims ordered by the output's strides and coalesced, inputs
// that are one value everywhere marked as scalars, and the index space cut into launches whose
// linear index fits in 32 bits.

#include <array>
#include <functional>
#include <vector>

#include "ember/core/loop_dims.h"
#include "ember/core/tensor.h"

namespace ember::cuda {

inline constexpr int kMaxOperands = kMaxLoopOperands;  // the output and up to three inputs (where)
inline constexpr int kMaxDims = 6;                     // dims one launch's offset calculator walks

// How an input that is one value everywhere reaches a kernel: a 0-dim CPU tensor (a wrapped
// Scalar) is read here and passed by value; a one-element CUDA tensor is read once per thread.
enum class ScalarKind : uint8_t { None, Host, Device };

// One launch: at most kMaxDims dims, innermost first, fewer than 2^31 elements.
struct LaunchChunk {
  int ndim = 0;
  int64_t numel = 0;
  std::array<int64_t, kMaxDims> sizes{};
  std::array<std::array<int64_t, kMaxOperands>, kMaxDims> strides{};  // bytes
  std::array<char*, kMaxOperands> data{};
};

class ElementwisePlan {
 public:
  // operands[0] is the output; CUDA inputs broadcast to its shape, CPU inputs must be 0-dim
  // scalars. An input that partially overlaps the output is copied first, so the result is as
  // if all inputs were read before anything is written (exact aliasing is fine as it is).
  explicit ElementwisePlan(std::initializer_list<Tensor> operands);

  int ntensors() const { return n_; }
  int64_t numel() const { return numel_; }
  ScalarType dtype(int k) const { return dtypes_[k]; }
  ScalarKind scalar(int k) const { return scalar_[k]; }
  const Scalar& host_value(int k) const { return host_value_[k]; }
  char* data(int k) const { return data_[k]; }
  // Every operand that is not a scalar walks memory densely, in the same order.
  bool contiguous() const { return contiguous_; }
  // Operand k (a contiguous one) starts on a multiple of `bytes`.
  bool aligned(int k, int bytes) const {
    return scalar_[k] != ScalarKind::None || reinterpret_cast<uintptr_t>(data_[k]) % bytes == 0;
  }

  // Calls f once per launch: dims beyond kMaxDims and index spaces of 2^31 elements or more
  // are walked here, on the host.
  void for_each_chunk(const std::function<void(const LaunchChunk&)>& f) const;

 private:
  int n_ = 0;
  int64_t numel_ = 0;
  DimVector sizes_;                              // coalesced, innermost first, at least one dim
  std::array<DimVector, kMaxOperands> strides_;  // bytes, scalars 0
  std::array<char*, kMaxOperands> data_{};
  std::array<ScalarType, kMaxOperands> dtypes_{};
  std::array<ScalarKind, kMaxOperands> scalar_{};
  std::array<Scalar, kMaxOperands> host_value_;
  bool contiguous_ = false;
  std::vector<Tensor> temporaries_;  // inputs copied away from an overlapping output
};

// Whether writing `out` could change what `in` reads, other than element by element in place.
bool partially_overlaps(const Tensor& out, const Tensor& in);

// The SM count of the current device (cached).
int multiprocessor_count();

}  // namespace ember::cuda
