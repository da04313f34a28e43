#pragma once

// What the nn CPU kernels share: the compute type of a float dtype, Eigen maps, and moving a
// row between a tensor's dtype and the compute type without a copy when they agree.

#include <Eigen/Core>
#include <limits>

#include "ember/core/cpu/elementwise_loop.h"

namespace ember::cpu {

// f(double{}) for float64, f(float{}) for float32, float16 and bfloat16.
template <class F>
decltype(auto) visit_float_compute(ScalarType t, F&& f) {
  if (t == kFloat64) return f(double{});
  return f(float{});
}

template <class C>
using ArrayX = Eigen::Array<C, Eigen::Dynamic, 1>;
template <class C>
using ArrayMap = Eigen::Map<ArrayX<C>>;
template <class C>
using ConstArrayMap = Eigen::Map<const ArrayX<C>>;

// exp(x) of an Eigen array expression, with results below the smallest normal number flushed
// to 0. Eigen's vectorized exp clamps its input, so exp(-inf) would be a subnormal 2.9e-39 instead
// of 0: masked softmax entries would not be exactly 0, and subnormals slow later arithmetic
// (attention's P V product) a hundredfold.
template <class Derived>
auto exp_ftz(const Eigen::ArrayBase<Derived>& x) {
  using C = typename Derived::Scalar;
  const C min_arg =
      std::is_same_v<C, double> ? C(-708.3964185322641) : C(-87.33654475);  // log(min)
  return (x.derived() < min_arg).select(C(0), x.derived().exp());
}

// n contiguous elements of dtype `dt` at p as C: p itself when dt is C, else converted into buf.
template <class C>
const C* load_compute(const void* p, ScalarType dt, int64_t n, C* buf) {
  if (dt == dtype_of<C>) return static_cast<const C*>(p);
  load_as<C>(static_cast<const char*>(p), static_cast<int64_t>(element_size(dt)), dt, n, buf);
  return buf;
}

// Where to write n results bound for dtype-`dt` memory at p: p itself when dt is C, else buf
// (store_compute then converts).
template <class C>
C* out_compute(void* p, ScalarType dt, C* buf) {
  return dt == dtype_of<C> ? static_cast<C*>(p) : buf;
}

template <class C>
void store_compute(const C* v, void* p, ScalarType dt, int64_t n) {
  if (v != p) store_as<C>(v, static_cast<char*>(p), static_cast<int64_t>(element_size(dt)), dt, n);
}

// Byte address of element `i` of a contiguous tensor.
inline char* byte_ptr(const Tensor& t, int64_t i) {
  return static_cast<char*>(t.data_ptr()) + i * static_cast<int64_t>(t.element_size());
}

}  // namespace ember::cpu
