#include "ember/core/dtype.h"

namespace ember {

std::string_view to_string(ScalarType t) {
  constexpr std::string_view names[] = {"bool",    "uint8",    "int32",   "int64",
                                        "float16", "bfloat16", "float32", "float64"};
  return names[static_cast<int>(t)];
}

std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << to_string(t); }

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  if (is_reduced_float(a) && is_reduced_float(b)) return kFloat32;
  return a > b ? a : b;
}

}  // namespace ember
