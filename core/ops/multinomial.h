#pragma once

// torch.multinomial: indices drawn from the categories of each row of non-negative weights (they
// need not sum to 1), with or without replacement.

#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

// input [C] or [R, C] of floating weights; returns int64 [num_samples] or [R, num_samples].
// With replacement each draw is independent (inverse CDF of the row's cumulative sums); without,
// the draw is Efraimidis-Spirakis (the num_samples largest keys log(u) / w), so zero weights are
// never drawn and a row's indices are distinct. Bad weights (negative, inf, NaN, a row summing to
// 0, fewer positive weights than samples without replacement) throw; checking them reads one
// small tensor back (on a GPU this waits for it, as PyTorch's CPU check would).
Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);

}  // namespace ember
