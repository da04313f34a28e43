#pragma once

// Shape ops that move data: concatenation, flips and rolls, padding, repetition, triangles.
// The Tensor methods of the same names (x.flip(dims), x.tril()) call these.

#include <optional>
#include <string>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// x itself, or for a 0-dim x a 1-element 1-D view of it.
Tensor atleast_1d(const Tensor& x);

// Concatenates along `dim` in the promoted dtype of all inputs. 1-D empty tensors are skipped
// whatever their shape (PyTorch's legacy rule), though their dtype still takes part.
Tensor cat(ArrayRef<Tensor> tensors, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim.
Tensor stack(ArrayRef<Tensor> tensors, int64_t dim = 0);
Tensor flip(const Tensor& x, IntArrayRef dims);
// Rolls each dim of `dims` by its shift; without dims, rolls the flattened tensor by shifts[0].
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims = {});
// F.pad: `pad` holds (before, after) pairs starting from the last dim. mode "constant" fills with
// `value` (default 0) and crops for negative pads; "reflect" (pads < the dim's size) mirrors
// without repeating the edge; "replicate" repeats the edge.
Tensor pad(const Tensor& x, IntArrayRef pad, const std::string& mode = "constant",
           std::optional<Scalar> value = std::nullopt);
// Tiles x `repeats[d]` times along each dim; extra leading repeats add dims.
Tensor repeat(const Tensor& x, IntArrayRef repeats);
// Keeps the elements on and below (tril) or above (triu) the diagonal of the last two dims,
// `diagonal` above the main one; zeros the rest.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// Kernel families. remap: out (contiguous) at (i_0, ..., i_n) = in at element offset
// sum_d offsets_d[i_d], where `offsets` (int64, on in's device) concatenates one table per out
// dim, offsets_d of length out.size(d); a kRemapFill entry writes `fill` instead.
inline constexpr int64_t kRemapFill = -1;  // real offsets are never negative: strides are not
using RemapFn = void (*)(const Tensor& out, const Tensor& in, const Tensor& offsets, const Scalar& fill);
// out = tril(in, diagonal), or triu when `upper`; out is contiguous, of in's shape and dtype.
using TriFn = void (*)(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper);
extern DispatchStub<RemapFn> remap_stub;
extern DispatchStub<TriFn> tri_stub;

}  // namespace ember
