#include "ember/core/memory_format.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "ember/core/factories.h"
#include "ember/core/op_range.h"
#include "ember/core/shape.h"

namespace ember {

std::ostream& operator<<(std::ostream& os, MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous:
      return os << "Contiguous";
    case MemoryFormat::ChannelsLast:
      return os << "ChannelsLast";
    default:
      return os << "Preserve";
  }
}

void check_memory_format_rank(const char* op, MemoryFormat format, IntArrayRef sizes) {
  EMBER_CHECK(format != MemoryFormat::ChannelsLast || sizes.size() == 4, op,
              ": required rank 4 tensor to use channels_last format, got shape ", sizes);
}

DimVector channels_last_strides(const char* op, IntArrayRef sizes) {
  check_memory_format_rank(op, MemoryFormat::ChannelsLast, sizes);
  DimVector strides(4);
  strides[1] = 1;
  strides[3] = sizes[1];
  strides[2] = strides[3] * sizes[3];
  strides[0] = strides[2] * sizes[2];
  return strides;
}

bool is_channels_last_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool is_channels_last_strides(IntArrayRef sizes, IntArrayRef strides) {
  if (sizes.size() != 4 || strides[1] == 0) return false;
  int64_t min = 0;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    // [N, 1, 1, 1] with equal strides (a contiguous N111, or N11W sliced along W) stays NCHW.
    if (d == 0 && min == strides[1]) return false;
    // Telling [H, 1, 1, 1] (NHWC N1H1) from [H, H, 1, 1] (NCHW) needs the size-1 dims' strides.
    min = strides[d] * (sizes[d] > 1 ? sizes[d] : 1);
  }
  return true;
}

bool is_non_overlapping_and_dense(IntArrayRef sizes, IntArrayRef strides) {
  const size_t nd = sizes.size();
  if (nd == 1) return sizes[0] < 2 || strides[0] == 1;
  SmallVector<int64_t, 6> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  // Fastest first; dims of size 0 and 1 at the end.
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (int64_t d : perm) {
    if (sizes[d] < 2) return true;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

DimVector dense_strides_like(IntArrayRef sizes, ArrayRef<IntArrayRef> operand_strides) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  // 1 when dim a goes after (is slower than) dim b, -1 when before, 0 when no operand tells.
  auto should_swap = [&](int64_t a, int64_t b) {
    for (IntArrayRef s : operand_strides) {
      if (s[a] == 0 || s[b] == 0) continue;
      if (s[a] != s[b]) return s[a] < s[b] ? -1 : 1;
      if (sizes[a] > sizes[b]) return 1;  // equal strides: the smaller dim goes first
    }
    return 0;
  };
  // perm fastest dim first, starting from row-major order; an insertion sort that stops at the
  // first decided comparison, as TensorIterator's reorder_dimensions.
  SmallVector<int64_t, 6> perm(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i) {
    for (int64_t d1 = i, d0 = i - 1; d0 >= 0; --d0) {
      int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  DimVector strides(static_cast<size_t>(nd));
  int64_t next = 1;
  for (int64_t d : perm) {
    strides[d] = next;
    next *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Tensor empty_like_layout(IntArrayRef shape, const TensorOptions& options,
                         std::initializer_list<Tensor> inputs) {
  if (std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.is_contiguous(); }))
    return empty(shape, options);  // the common case, first
  bool same_shape = true;
  for (const Tensor& t : inputs) same_shape = same_shape && t.sizes().equals(shape);
  if (same_shape) {  // TensorIterator's fast setups
    bool channels_last = true, dense_alike = true;
    const Tensor& first = *inputs.begin();
    for (const Tensor& t : inputs) {
      channels_last = channels_last && t.is_contiguous(MemoryFormat::ChannelsLast);
      dense_alike = dense_alike && t.is_non_overlapping_and_dense() && t.strides().equals(first.strides());
    }
    if (channels_last) return empty(shape, options.memory_format(MemoryFormat::ChannelsLast));
    if (dense_alike) return empty_strided(shape, first.strides(), options);
  }
  // Each input's strides broadcast to `shape`: 0 for the dims it lacks or has of size 1.
  constexpr size_t kMaxInputs = 4;
  EMBER_CHECK(inputs.size() <= kMaxInputs, "empty_like_layout: ", inputs.size(), " inputs, at most ",
              kMaxInputs);
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::array<DimVector, kMaxInputs> broadcast;
  std::array<IntArrayRef, kMaxInputs> refs;
  size_t k = 0;
  for (const Tensor& t : inputs) {
    DimVector& s = broadcast[k];
    s.resize(static_cast<size_t>(nd), 0);
    for (int64_t d = nd - t.dim(), i = 0; d < nd; ++d, ++i)
      if (t.size(i) != 1 || shape[d] == 1) s[d] = t.stride(i);
    refs[k++] = s;
  }
  return empty_strided(shape, dense_strides_like(shape, ArrayRef<IntArrayRef>(refs.data(), k)), options);
}

bool same_dense_layout(const Tensor& t, const Tensor& like) {
  if (!like.is_non_overlapping_and_dense()) return false;
  for (int64_t d = 0; d < like.dim(); ++d)
    if (like.size(d) != 1 && t.stride(d) != like.stride(d)) return false;
  return true;
}

bool Tensor::is_contiguous(MemoryFormat memory_format) const {
  EMBER_CHECK(memory_format != MemoryFormat::Preserve,
              "is_contiguous: memory format Preserve is not supported, use Contiguous or ChannelsLast");
  if (memory_format == MemoryFormat::Contiguous) return is_contiguous();
  return is_channels_last_contiguous(sizes(), strides());
}

bool Tensor::is_non_overlapping_and_dense() const {
  return is_contiguous() || ember::is_non_overlapping_and_dense(sizes(), strides());
}

MemoryFormat Tensor::suggest_memory_format() const {
  return is_channels_last_strides(sizes(), strides()) ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

Tensor Tensor::contiguous(MemoryFormat memory_format) const {
  detail::OpRange op_range("contiguous", *this);
  EMBER_CHECK(memory_format != MemoryFormat::Preserve,
              "contiguous: memory format Preserve is not supported, use Contiguous or ChannelsLast");
  check_memory_format_rank("contiguous", memory_format, sizes());
  return is_contiguous(memory_format) ? *this : clone(memory_format);
}

}  // namespace ember
