#pragma once

// The math of every reduction, written once for the CPU loop (core/cpu) and a CUDA kernel:
// each op is a map of each element (pre), an associative core with a mergeable state, and a
// map of the result (post). Norm p=2, for one, is {Square, Sum, Sqrt}.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ember/core/macros.h"

namespace ember::ops {

enum class ReduceOp : uint8_t { Sum, Prod, Mean, Max, Min, Var, Std, Norm, LogSumExp, All, Any };

struct ReduceParams {
  double p = 2;            // norm's order
  int64_t correction = 1;  // var/std: divide by max(0, N - correction)
};

enum class ReducePre : uint8_t { None, Abs, Square, AbsPow, NonZero };
enum class ReduceCore : uint8_t { Sum, Prod, Max, Min, Var, LogSumExp };
enum class ReducePost : uint8_t { None, Mean, Sqrt, Root, Var, Std, Positive };

struct ReducePlan {
  ReducePre pre;
  ReduceCore core;
  ReducePost post;
};

inline ReducePlan reduce_plan(ReduceOp op, const ReduceParams& p) {
  using Pre = ReducePre;
  using Core = ReduceCore;
  using Post = ReducePost;
  switch (op) {
    case ReduceOp::Sum: return {Pre::None, Core::Sum, Post::None};
    case ReduceOp::Prod: return {Pre::None, Core::Prod, Post::None};
    case ReduceOp::Mean: return {Pre::None, Core::Sum, Post::Mean};
    case ReduceOp::Max: return {Pre::None, Core::Max, Post::None};
    case ReduceOp::Min: return {Pre::None, Core::Min, Post::None};
    case ReduceOp::Var: return {Pre::None, Core::Var, Post::Var};
    case ReduceOp::Std: return {Pre::None, Core::Var, Post::Std};
    case ReduceOp::LogSumExp: return {Pre::None, Core::LogSumExp, Post::None};
    // NonZero maps to 0/1, so all = min > 0 and any = max > 0 (empty: +inf and -inf).
    case ReduceOp::All: return {Pre::NonZero, Core::Min, Post::Positive};
    case ReduceOp::Any: return {Pre::NonZero, Core::Max, Post::Positive};
    case ReduceOp::Norm: break;
  }
  if (p.p == 2) return {Pre::Square, Core::Sum, Post::Sqrt};
  if (p.p == 1) return {Pre::Abs, Core::Sum, Post::None};
  if (p.p == 0) return {Pre::NonZero, Core::Sum, Post::None};
  if (p.p == INFINITY) return {Pre::Abs, Core::Max, Post::None};
  if (p.p == -INFINITY) return {Pre::Abs, Core::Min, Post::None};
  return {Pre::AbsPow, Core::Sum, Post::Root};
}

template <class T>
EMBER_HOST_DEVICE inline T reduce_pre(ReducePre pre, T x, double p) {
  switch (pre) {
    case ReducePre::None: return x;
    case ReducePre::Abs: return x < T(0) ? -x : x;
    case ReducePre::Square: return x * x;
    case ReducePre::AbsPow: return static_cast<T>(std::pow(x < T(0) ? -x : x, p));
    case ReducePre::NonZero: return x != T(0);  // NaN is nonzero
  }
  return x;
}

// `n` is the number of reduced elements.
template <class T>
EMBER_HOST_DEVICE inline T reduce_post(ReducePost post, T v, int64_t n, const ReduceParams& p) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (post) {
      case ReducePost::Mean: return v / static_cast<T>(n);
      case ReducePost::Sqrt: return std::sqrt(v);
      case ReducePost::Root: return std::pow(v, T(1) / static_cast<T>(p.p));
      case ReducePost::Var:
      case ReducePost::Std: {
        T d = n > p.correction ? static_cast<T>(n - p.correction) : T(0);
        return post == ReducePost::Var ? v / d : std::sqrt(v / d);
      }
      default: break;
    }
  }
  if (post == ReducePost::Positive) return v > T(0);
  return v;
}

// Whether x beats y for max (is_max) or min, NaN beating everything; ties do not beat.
template <class T>
EMBER_HOST_DEVICE inline bool extreme_beats(T x, T y, bool is_max) {
  if (x != x) return y == y;
  return is_max ? x > y : x < y;
}

// Running variance (count, mean, sum of squared deviations), merged by Chan et al.'s formula.
struct VarState {
  double n = 0, mean = 0, m2 = 0;
};

EMBER_HOST_DEVICE inline void merge(VarState& a, const VarState& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  double n = a.n + b.n, d = b.mean - a.mean;
  a.mean += d * (b.n / n);
  a.m2 += b.m2 + d * d * (a.n * b.n / n);
  a.n = n;
}

// log(sum(exp(x))) as (max, sum of exp(x - max)). A non-finite max is the answer itself
// (all -inf, some +inf, or NaN), so its sum is never formed: no inf - inf.
struct LseState {
  double max = -INFINITY, sum = 0;
};

EMBER_HOST_DEVICE inline void merge(LseState& a, const LseState& b) {
  double m = (b.max != b.max || b.max > a.max) ? b.max : a.max;
  if (!std::isfinite(m)) {
    a = {m, 0};
    return;
  }
  a.sum = a.sum * std::exp(a.max - m) + b.sum * std::exp(b.max - m);
  a.max = m;
}

EMBER_HOST_DEVICE inline double lse_value(const LseState& s) {
  return std::isfinite(s.max) ? s.max + std::log(s.sum) : s.max;
}

}  // namespace ember::ops
