#include "ember/core/finfo.h"

#include <limits>

#include "ember/core/error.h"

namespace ember {
namespace {

template <class T>
FInfo ieee(ScalarType dtype, double resolution) {
  using L = std::numeric_limits<T>;
  return {dtype, static_cast<int>(sizeof(T) * 8), L::epsilon(), L::max(), L::lowest(), L::min(), resolution};
}

template <class T>
IInfo integral(ScalarType dtype) {
  using L = std::numeric_limits<T>;
  return {dtype, static_cast<int>(sizeof(T) * 8), static_cast<int64_t>(L::max()),
          static_cast<int64_t>(L::min())};
}

}  // namespace

FInfo finfo(ScalarType dtype) {
  switch (dtype) {
    case kFloat16:  // 10 fraction bits, exponent bias 15
      return {dtype, 16, 0x1p-10, 65504.0, -65504.0, 0x1p-14, 1e-3};
    case kBFloat16:  // float32's exponent with 7 fraction bits
      return {dtype, 16, 0x1p-7, 0x1.fep+127, -0x1.fep+127, 0x1p-126, 1e-2};
    case kFloat32:
      return ieee<float>(dtype, 1e-6);
    case kFloat64:
      return ieee<double>(dtype, 1e-15);
    default:
      throw Error(
          detail::str_cat("finfo: expected a floating point dtype, got ", dtype, " (iinfo takes integers)"));
  }
}

IInfo iinfo(ScalarType dtype) {
  switch (dtype) {
    case kUInt8:
      return integral<uint8_t>(dtype);
    case kInt32:
      return integral<int32_t>(dtype);
    case kInt64:
      return integral<int64_t>(dtype);
    default:
      throw Error(detail::str_cat("iinfo: expected an integral dtype other than bool, got ", dtype,
                                  is_floating_point(dtype) ? " (finfo takes floating point dtypes)" : ""));
  }
}

}  // namespace ember
