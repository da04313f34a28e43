#pragma once

// Memory formats (PyTorch's at::MemoryFormat): the order in which a dense tensor's dims are laid
// out, and the layout rules of new tensors. ChannelsLast is NHWC memory for a tensor indexed
// [N, C, H, W], as torch.channels_last.

#include <initializer_list>
#include <ostream>

#include "ember/core/small_vector.h"

namespace ember {

class Tensor;
struct TensorOptions;

enum class MemoryFormat : uint8_t {
  Contiguous,    // row-major (NCHW)
  ChannelsLast,  // NHWC; 4-D tensors only
  Preserve,      // the source's layout when it is dense, else the same order of dims, made dense
};

std::ostream& operator<<(std::ostream& os, MemoryFormat f);

// Throws naming `op` when `format` is ChannelsLast and `sizes` are not 4-D.
void check_memory_format_rank(const char* op, MemoryFormat format, IntArrayRef sizes);

// The strides of a dense [N, C, H, W] tensor in NHWC order (c10's get_channels_last_strides_2d);
// throws naming `op` for other ranks.
DimVector channels_last_strides(const char* op, IntArrayRef sizes);

// Geometry tests with PyTorch's definitions: a dim of size 1 takes any stride.
bool is_channels_last_contiguous(IntArrayRef sizes, IntArrayRef strides);  // false unless 4-D
// Whether the strides order the dims as NHWC does (the test behind suggest_memory_format), with
// PyTorch's fallback to NCHW where size-1 dims make the order ambiguous.
bool is_channels_last_strides(IntArrayRef sizes, IntArrayRef strides);
// No two elements share memory and they fill a block without gaps, in some order of the dims.
bool is_non_overlapping_and_dense(IntArrayRef sizes, IntArrayRef strides);

// Whether t and `like` (of one shape) are both dense with the same strides wherever a dim has
// more than one element: flat kernels (the fused optimizers) may then walk them side by side.
bool same_dense_layout(const Tensor& t, const Tensor& like);

// Dense strides that order the dims as operands' strides do, as PyTorch's TensorIterator orders an
// output's dims: dims sorted fastest first by the first operand whose strides tell them apart (a
// stride of 0, a broadcast dim, tells nothing); ties keep the row-major order. Each operand's
// strides are given for `sizes` (broadcast dims 0).
DimVector dense_strides_like(IntArrayRef sizes, ArrayRef<IntArrayRef> operand_strides);

// A new elementwise result of `shape`, laid out as PyTorch's TensorIterator lays out a result
// from its inputs: contiguous when every input is; channels-last when every input is; else
// the dims ordered as the inputs' strides order them (dense_strides_like, inputs broadcast to
// `shape`). An NHWC input thus gives an NHWC result, also with a bias [C, 1, 1] or a scalar.
Tensor empty_like_layout(IntArrayRef shape, const TensorOptions& options,
                         std::initializer_list<Tensor> inputs);

}  // namespace ember
