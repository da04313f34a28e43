#pragma once

// What the layers' option structs are made of: libtorch's TORCH_ARG accessors and
// ExpandingArray (one size for every spatial dim, or one per dim).

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>

#include "ember/core/array_ref.h"
#include "ember/core/error.h"

// An option `name` of type T with a chaining setter and a getter, as libtorch's TORCH_ARG:
// `LinearOptions(4, 2).bias(false)`, `options.bias()`. A default value may follow the macro.
#define EMBER_ARG(T, name)                                 \
 public:                                                   \
  auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                            \
    return *this;                                          \
  }                                                        \
  const T& name() const noexcept { return this->name##_; } \
  T& name() noexcept { return this->name##_; }             \
                                                           \
 private:                                                  \
  T name##_

namespace ember::nn {

// D sizes given as one number for all dims (`3`) or one per dim (`{3, 5}`).
template <size_t D>
class ExpandingArray {
 public:
  ExpandingArray(int64_t value) { values_.fill(value); }
  ExpandingArray(std::initializer_list<int64_t> values) {
    EMBER_CHECK(values.size() == D, "ExpandingArray: expected ", D, " values, got ", values.size());
    std::copy(values.begin(), values.end(), values_.begin());
  }

  int64_t operator[](size_t i) const { return values_[i]; }
  operator IntArrayRef() const { return IntArrayRef(values_.data(), D); }
  bool all_equal() const {
    for (int64_t v : values_)
      if (v != values_[0]) return false;
    return true;
  }
  bool all(int64_t value) const { return all_equal() && values_[0] == value; }

 private:
  std::array<int64_t, D> values_;
};

// Python's tuple repr, as PyTorch prints sizes: (3,) and (3, 5).
template <size_t D>
std::ostream& operator<<(std::ostream& os, const ExpandingArray<D>& a) {
  os << "(";
  for (size_t i = 0; i < D; ++i) os << (i ? ", " : "") << a[i];
  return os << (D == 1 ? ",)" : ")");
}

}  // namespace ember::nn
