#pragma once

#include <optional>
#include <utility>

#include "ember/core/tensor.h"

namespace ember {

// Python-style indexing: x.index({Slice(1, None), 0, Ellipsis, None}) is x[1:, 0, ..., None], and
// a tensor among the indices indexes as in PyTorch (core/ops/advanced_indexing.h): x.index({mask}) is
// x[mask], x.index({Slice(), idx}) is x[:, idx].
inline constexpr std::nullopt_t None = std::nullopt;
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(std::optional<int64_t> start_ = std::nullopt, std::optional<int64_t> stop_ = std::nullopt,
        int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};

struct TensorIndex {
  enum class Kind : int8_t { Integer, Slice, None, Ellipsis, Tensor } kind;
  int64_t integer = 0;
  Slice slice;
  ember::Tensor tensor;
  TensorIndex(int64_t i) : kind(Kind::Integer), integer(i) {}
  TensorIndex(int i) : kind(Kind::Integer), integer(i) {}
  TensorIndex(Slice s) : kind(Kind::Slice), slice(s) {}
  TensorIndex(std::nullopt_t) : kind(Kind::None) {}
  TensorIndex(EllipsisIndex) : kind(Kind::Ellipsis) {}
  TensorIndex(ember::Tensor t) : kind(Kind::Tensor), tensor(std::move(t)) {}
};

}  // namespace ember
