#pragma once

// Indexing ops that read or write along a dim through an index tensor. Index values must lie in
// [0, size): every one is checked before any element moves (negative indices are errors, as
// in PyTorch). Index tensors are int64 (index_select and index_add also take int32).
// Tensor::index_select and Tensor::gather call these.

#include <optional>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// out.select(dim, i) = x.select(dim, index[i]) for a 1-D (or 0-dim) index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1; out has index's shape, which may be smaller
// than x's apart from dim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with out[i][index[i][j][k]][k] = src[i][j][k] for dim 1 (the scalar form writes
// `value`). With repeated indices the last write in index order wins.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
// Like scatter, but adds: repeated indices accumulate.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// A copy of x with out.select(dim, index[i]) += alpha * source.select(dim, i).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
// In-place forms of the above; they return self.
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value);
const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
const Tensor& index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha = 1);
// gather after broadcasting x and indices against each other apart from dim; without dim, picks
// from the flattened x and returns a 1-D tensor.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
// int64 tensor of indices' shape plus a last dim of num_classes (-1: max(indices) + 1), 1 at
// each index and 0 elsewhere.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

namespace detail {
// index (int64 or int32, values in [-size, size)) as int64 positions in [0, size) of a dim `dim`
// of `size`, for `op`: the CPU checks the values here, a CUDA kernel as it reads them (a bad one
// raised at the next synchronization, as the kernels below do).
Tensor index_positions(const char* op, const Tensor& index, int64_t dim, int64_t size);
}  // namespace detail

// Kernel families. Index tensors reach them as int64, with as many dims as self (at least one),
// of sizes no larger than self's apart from dim. On the CPU their values are in range (the
// frontend checks); CUDA kernels check each value as they read it and record a bad one for
// `op`'s error, raised at the next synchronization (cuda/device_error.h), so that no check waits
// for the GPU.
// gather: out[p] = self[p with p[dim] = index[p]]; out has index's shape.
using GatherFn = void (*)(const char* op, const Tensor& out, const Tensor& self, int64_t dim,
                          const Tensor& index);
// scatter: self[p with p[dim] = index[p]] = src[p] (Assign) or += alpha * src[p] (Add), in index order
// along dim; src has sizes at least index's.
enum class ScatterOp : int8_t { Assign, Add };
using ScatterFn = void (*)(const char* op, ScatterOp sop, const Tensor& self, int64_t dim,
                           const Tensor& index, const Tensor& src, const Scalar& alpha);
// The smallest and largest value of a non-empty int64 tensor, for `op` (the CPU's range checks;
// on CUDA it waits for the GPU, so only what needs the values on the host uses it).
struct IndexRange {
  int64_t min, max;
};
using IndexRangeFn = IndexRange (*)(const char* op, const Tensor& index);
extern DispatchStub<GatherFn> gather_stub;
extern DispatchStub<ScatterFn> scatter_stub;
extern DispatchStub<IndexRangeFn> index_range_stub;

}  // namespace ember
