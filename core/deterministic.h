#pragma once

// torch.use_deterministic_algorithms: with the mode on, every op gives the same bits from run to
// run on the same inputs and GPU. On the CPU every ember op already does; on CUDA the mode makes
// the adds of scatter_add, index_add, index_put(accumulate), embedding's and gather's backward
// run in index order instead of by atomics, keeps cuDNN to its deterministic engines
// (convolutions, and the attention backward's ordered query gradient), and raises where an op has
// no deterministic way (or warns once per op, with warn_only). Deterministic paths are slower.
#include <string>

namespace ember {

void use_deterministic_algorithms(bool mode, bool warn_only = false);
bool are_deterministic_algorithms_enabled();
bool is_deterministic_algorithms_warn_only_enabled();

namespace detail {
// Called where `op` is about to run a nondeterministic algorithm (`what`) because it has no
// deterministic one for its inputs: throws an ember::Error naming both when the mode is on, prints
// one warning per op with warn_only, else does nothing.
void alert_not_deterministic(const char* op, const std::string& what);
}  // namespace detail

}  // namespace ember
