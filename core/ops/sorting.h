#pragma once

// Sorting along a dim. NaN counts as larger than every number (last in an ascending sort, first
// in a descending one), and equal elements keep their input order: every sort here is stable.

#include <tuple>

#include "ember/core/dispatch.h"
#include "ember/core/tensor.h"

namespace ember {

// (values, int64 indices into dim); `stable` is accepted for PyTorch's signature.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) elements along dim and their indices, in sorted order when `sorted`
// (else in an unspecified order). Ties go to the lower index.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

// The kernel family: the first k of each line of self along dim in the order above (descending
// when `descending`), into values and indices (size k along dim); sort is k = size.
using SortFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim,
                        int64_t k, bool descending, bool sorted);
extern DispatchStub<SortFn> sort_stub;

}  // namespace ember
