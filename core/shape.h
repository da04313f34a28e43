#pragma once

#include <optional>

#include "ember/core/small_vector.h"

namespace ember {

// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
// A 0-dim tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);

// Broadcasts two shapes by numpy's rules; throws naming `op` and both shapes.
DimVector broadcast_shapes(const char* op, IntArrayRef a, IntArrayRef b);

DimVector contiguous_strides(IntArrayRef sizes);
int64_t numel_of(IntArrayRef sizes);

// Element and byte counts with int64 overflow checked: the result, or an ember::Error naming `op`
// (a shape whose element count does not fit, a storage span or byte count past 2^63 - 1). Every
// count that user-given sizes feed goes through these.
int64_t checked_mul(const char* op, int64_t a, int64_t b);
int64_t checked_add(const char* op, int64_t a, int64_t b);
// The element count of `sizes` (each non-negative).
int64_t checked_numel(const char* op, IntArrayRef sizes);
// The number of storage elements a (sizes, strides) tensor reaches from its first element: 1 +
// the largest offset, 0 when it is empty. Strides must be non-negative.
int64_t checked_span(const char* op, IntArrayRef sizes, IntArrayRef strides);
// Throws naming `op` (the factory called) for a negative size of a new tensor.
void check_sizes(const char* op, IntArrayRef sizes);
// The byte count of a new tensor of `sizes` with elements of element_size bytes: the check every
// factory makes first, so that a negative size or an overflow names the factory called.
int64_t checked_nbytes(const char* op, IntArrayRef sizes, int64_t element_size);

// Resolves a single -1 in a requested shape against numel; throws naming `op`.
DimVector infer_size(const char* op, IntArrayRef shape, int64_t numel);

// Strides for viewing a (sizes, strides) tensor as `new_sizes` without a copy, or nullopt when
// the memory layout makes that impossible (PyTorch's computeStride).
std::optional<DimVector> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes);

// A bitmask of dims from a dim list (empty list: all dims); throws on repeats.
uint64_t dim_mask(const char* op, IntArrayRef dims, int64_t ndim);

}  // namespace ember
