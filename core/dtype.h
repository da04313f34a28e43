#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "ember/core/half.h"

namespace ember {

// Ordered so that promotion within a category is "the larger one wins" (see promote_types).
enum class ScalarType : int8_t { Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
using Dtype = ScalarType;
inline constexpr int kNumScalarTypes = 8;

inline constexpr ScalarType kBool = ScalarType::Bool;
inline constexpr ScalarType kUInt8 = ScalarType::UInt8;
inline constexpr ScalarType kByte = ScalarType::UInt8;
inline constexpr ScalarType kInt32 = ScalarType::Int32;
inline constexpr ScalarType kInt = ScalarType::Int32;
inline constexpr ScalarType kInt64 = ScalarType::Int64;
inline constexpr ScalarType kLong = ScalarType::Int64;
inline constexpr ScalarType kFloat16 = ScalarType::Float16;
inline constexpr ScalarType kHalf = ScalarType::Float16;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
inline constexpr ScalarType kFloat32 = ScalarType::Float32;
inline constexpr ScalarType kFloat = ScalarType::Float32;
inline constexpr ScalarType kFloat64 = ScalarType::Float64;
inline constexpr ScalarType kDouble = ScalarType::Float64;

constexpr size_t element_size(ScalarType t) {
  constexpr size_t sizes[] = {1, 1, 4, 8, 2, 2, 4, 8};
  return sizes[static_cast<int>(t)];
}
constexpr bool is_floating_point(ScalarType t) { return t >= ScalarType::Float16; }
constexpr bool is_integral(ScalarType t, bool include_bool) {
  return (t >= ScalarType::UInt8 && t <= ScalarType::Int64) || (include_bool && t == ScalarType::Bool);
}
constexpr bool is_reduced_float(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16;
}

std::string_view to_string(ScalarType t);  // "float32", as PyTorch prints it
std::ostream& operator<<(std::ostream& os, ScalarType t);

// PyTorch's promotion lattice: bool < integers < floats; f16 with bf16 gives f32.
ScalarType promote_types(ScalarType a, ScalarType b);

// C++ type <-> ScalarType.
template <class T>
struct CppTypeToScalarType;
#define EMBER_DTYPE_MAP(T, S)                          \
  template <>                                          \
  struct CppTypeToScalarType<T> {                      \
    static constexpr ScalarType value = ScalarType::S; \
  };
EMBER_DTYPE_MAP(bool, Bool)
EMBER_DTYPE_MAP(uint8_t, UInt8)
EMBER_DTYPE_MAP(int32_t, Int32)
EMBER_DTYPE_MAP(int64_t, Int64)
EMBER_DTYPE_MAP(Half, Float16)
EMBER_DTYPE_MAP(BFloat16, BFloat16)
EMBER_DTYPE_MAP(float, Float32)
EMBER_DTYPE_MAP(double, Float64)
#undef EMBER_DTYPE_MAP
template <class T>
inline constexpr ScalarType dtype_of = CppTypeToScalarType<std::remove_cv_t<T>>::value;

// Calls f(T{}) with T the C++ type of `t`: the one switch over dtypes that kernels use.
template <class F>
decltype(auto) visit_dtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool:
      return f(bool{});
    case ScalarType::UInt8:
      return f(uint8_t{});
    case ScalarType::Int32:
      return f(int32_t{});
    case ScalarType::Int64:
      return f(int64_t{});
    case ScalarType::Float16:
      return f(Half{});
    case ScalarType::BFloat16:
      return f(BFloat16{});
    case ScalarType::Float32:
      return f(float{});
    case ScalarType::Float64:
      return f(double{});
  }
  return f(float{});
}

// Calls f(U{}) with an unsigned integer type of `bytes` bytes: kernels that only move elements
// (copies, gathers, sorts by key, collectives) need one instantiation per element size, not one
// per dtype.
template <class F>
decltype(auto) visit_element_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

}  // namespace ember
