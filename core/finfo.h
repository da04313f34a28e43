#pragma once

// torch.finfo and torch.iinfo: a dtype's numerical limits, for what training code derives from
// them (a mask filled with the most negative value, an epsilon at the dtype's resolution, a clamp
// to what a cast can hold).

#include <cstdint>

#include "ember/core/dtype.h"

namespace ember {

struct FInfo {
  ScalarType dtype;
  int bits;
  double eps;         // the gap between 1 and the next value
  double max, min;    // the largest finite value and its negative
  double tiny;        // the smallest positive normal value (smallest_normal)
  double resolution;  // 10^-(decimal digits of precision)
};

struct IInfo {
  ScalarType dtype;
  int bits;
  int64_t max, min;
};

// The limits of a floating dtype; any other throws an ember::Error naming the dtype.
FInfo finfo(ScalarType dtype);
// The limits of an integral dtype (bool excluded, as in PyTorch); any other throws.
IInfo iinfo(ScalarType dtype);

}  // namespace ember
