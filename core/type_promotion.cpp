#include "ember/core/type_promotion.h"

#include <optional>

namespace ember {
namespace {

int category(ScalarType t) { return t == kBool ? 0 : is_floating_point(t) ? 2 : 1; }

struct State {
  std::optional<ScalarType> dim, zero, wrapped;
};

void update(std::optional<ScalarType>& slot, ScalarType t) { slot = slot ? promote_types(*slot, t) : t; }

// The higher-ranked result wins unless the lower-ranked one is of a higher category.
std::optional<ScalarType> combine(std::optional<ScalarType> higher, std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}

ScalarType finish(const State& s) { return *combine(s.dim, combine(s.zero, s.wrapped)); }

void add(State& s, const Tensor& t) { update(t.dim() > 0 ? s.dim : s.zero, t.dtype()); }

}  // namespace

ScalarType result_type(const Tensor& a, const Tensor& b) {
  State s;
  add(s, a);
  add(s, b);
  return finish(s);
}

ScalarType result_type(const Tensor& a, const Scalar& b) {
  State s;
  add(s, a);
  update(s.wrapped, b.default_dtype());
  return finish(s);
}

ScalarType result_type(std::initializer_list<Tensor> tensors) {
  State s;
  for (const Tensor& t : tensors) add(s, t);
  EMBER_CHECK(s.dim || s.zero, "result_type: needs at least one tensor");
  return finish(s);
}

void check_can_cast(const char* op, ScalarType from, ScalarType to) {
  EMBER_CHECK(category(from) <= category(to), op, ": result type ", from,
              " can't be cast to the desired output type ", to);
}

}  // namespace ember
