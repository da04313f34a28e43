#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "ember/core/dtype.h"

namespace ember {

// A number passed to an op (`x * 2`, `clamp(x, 0.0, 6.0)`): a bool, an integer or a double.
// Its category, not its width, takes part in type promotion, as with PyTorch's Python scalars.
class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Float };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_boolean() const { return kind_ == Kind::Bool; }

  template <class T>
  T to() const {
    if (kind_ == Kind::Float) return static_cast<T>(d_);
    return static_cast<T>(i_);
  }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_long() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }

  // The dtype a tensor made from this scalar gets: bool, int64, or the default float (float32).
  ScalarType default_dtype() const {
    return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : kFloat32;
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_boolean()) return os << (s.to_long() ? "True" : "False");
  if (s.is_integral()) return os << s.to_long();
  return os << s.to_double();
}

}  // namespace ember
