#include "ember/core/shape.h"

#include "ember/core/error.h"

namespace ember {

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  int64_t n = ndim > 0 ? ndim : 1;
  EMBER_CHECK(dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [", -n, ", ",
              n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

DimVector broadcast_shapes(const char* op, IntArrayRef a, IntArrayRef b) {
  size_t n = std::max(a.size(), b.size());
  DimVector out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast (size ",
                sa, " vs ", sb, " at dimension ", i, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector s(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return s;
}

int64_t checked_mul(const char* op, int64_t a, int64_t b) {
  int64_t r;
  EMBER_CHECK(!__builtin_mul_overflow(a, b, &r), op, ": ", a, " * ", b,
              " overflows int64 (a size, element count or byte count past 2^63 - 1)");
  return r;
}

int64_t checked_add(const char* op, int64_t a, int64_t b) {
  int64_t r;
  EMBER_CHECK(!__builtin_add_overflow(a, b, &r), op, ": ", a, " + ", b,
              " overflows int64 (a size, element count or byte count past 2^63 - 1)");
  return r;
}

int64_t checked_numel(const char* op, IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, op, ": negative dimension ", s, " in shape ", sizes);
    if (__builtin_mul_overflow(n, s, &n))
      throw Error(detail::str_cat(op, ": shape ", sizes, " has more than 2^63 - 1 elements"));
  }
  return n;
}

void check_sizes(const char* op, IntArrayRef sizes) {
  for (int64_t s : sizes)
    EMBER_CHECK(s >= 0, op, ": trying to create tensor with negative dimension ", s, ": ", sizes);
}

int64_t checked_nbytes(const char* op, IntArrayRef sizes, int64_t element_size) {
  check_sizes(op, sizes);
  return checked_mul(op, checked_numel(op, sizes), element_size);
}

int64_t checked_span(const char* op, IntArrayRef sizes, IntArrayRef strides) {
  int64_t last = 0;  // the largest offset
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    EMBER_CHECK(strides[d] >= 0, op, ": negative stride ", strides[d], " in strides ", strides);
    int64_t reach;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      throw Error(
          detail::str_cat(op, ": sizes ", sizes, " with strides ", strides, " reach past 2^63 - 1 elements"));
  }
  return checked_add(op, last, 1);
}

int64_t numel_of(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

DimVector infer_size(const char* op, IntArrayRef shape, int64_t numel) {
  DimVector out(shape);
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, op, ": only one dimension can be inferred, got shape ", shape);
      infer = static_cast<int>(i);
    } else {
      EMBER_CHECK(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ", shape);
      EMBER_CHECK(!__builtin_mul_overflow(known, shape[i], &known), op, ": shape ", shape,
                  " has more than 2^63 - 1 elements");
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of size ",
                numel);
    out[infer] = numel / known;
  } else {
    EMBER_CHECK(known == numel, op, ": shape ", shape, " is invalid for input of size ", numel);
  }
  return out;
}

std::optional<DimVector> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes) {
  DimVector out(new_sizes.size());
  if (numel_of(sizes) == 0) return contiguous_strides(new_sizes);
  if (sizes.empty()) return contiguous_strides(new_sizes);  // 0-dim: any shape of ones
  // Walk old dims in chunks that are contiguous among themselves; each chunk must be
  // exactly covered by a run of new dims.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

uint64_t dim_mask(const char* op, IntArrayRef dims, int64_t ndim) {
  EMBER_CHECK(ndim <= 64, op, ": at most 64 dimensions are supported, got ", ndim);
  if (dims.empty()) return ndim == 0 ? 0 : (ndim == 64 ? ~0ull : (1ull << ndim) - 1);
  uint64_t mask = 0;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, ndim);
    EMBER_CHECK(!(mask >> w & 1), op, ": dim ", w, " appears multiple times in the list of dims");
    mask |= 1ull << w;
  }
  if (ndim == 0) mask = 0;
  return mask;
}

}  // namespace ember
