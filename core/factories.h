#pragma once

#include <functional>
#include <initializer_list>
#include <variant>
#include <vector>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

Tensor empty(IntArrayRef sizes, TensorOptions options = {});
Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
Tensor zeros(IntArrayRef sizes, TensorOptions options = {});
Tensor ones(IntArrayRef sizes, TensorOptions options = {});
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options = {});
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> options = std::nullopt);

// arange(end), arange(start, end, step): int64 when all are integers, else float32 (as PyTorch).
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions options = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});

// The kernel arange and linspace fill with, on the tensor's device (no copy from the host, which
// would wait for the GPU): element i of the contiguous `out` is start + step * i below `half` and
// end - step * (numel - 1 - i) from there (linspace's symmetric fill), computed in double.
using RangeFn = void (*)(const Tensor& out, double start, double end, double step, int64_t half);
extern DispatchStub<RangeFn> range_stub;
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});

// Wraps memory the caller owns (no copy); `deleter` runs when the last view dies.
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options = {},
                 std::function<void(void*)> deleter = nullptr);
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {},
                 std::function<void(void*)> deleter = nullptr);

// A nested list of numbers for tensor({{1, 2}, {3, 4}}).
class NestedList {
 public:
  NestedList(Scalar s) : value_(s) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  NestedList(T v) : value_(Scalar(v)) {}
  NestedList(std::initializer_list<NestedList> l) : value_(std::vector<NestedList>(l)) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  NestedList(const std::vector<T>& v) : value_(std::vector<NestedList>(v.begin(), v.end())) {}

  bool is_scalar() const { return value_.index() == 0; }
  const Scalar& scalar() const { return std::get<0>(value_); }
  const std::vector<NestedList>& list() const { return std::get<1>(value_); }

 private:
  std::variant<Scalar, std::vector<NestedList>> value_;
};

// Copies the numbers; dtype inferred (bool, int64, or float32) unless options name one.
Tensor tensor(const NestedList& data, TensorOptions options = {});

}  // namespace ember
