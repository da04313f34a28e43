// The CPU reduction kernel. Inputs are read in tiles into an L1 buffer of the accumulation
// type C: double for floating results (f32/f16/bf16 sums are accumulated in double, so no
// compensated summation is needed), int64 for integer ones (wrapping on overflow, as PyTorch).
//
// Two loop orders, chosen by which group walks memory faster:
//  - rows: the reduced dims are innermost. Each output folds runs of its reduced elements
//    (vectorized across kLanes independent accumulators); short runs are batched as a
//    [outputs x run] tile.
//  - columns: a kept dim is innermost (sum over dim 0 of [4096, 4096]). A [rows x outputs] tile
//    is folded row by row into a block of output states, the inner loop walking the outputs.
// Work is split into units of (output block, slice of the reduced range). The number of slices
// depends only on the shapes, and slices are merged in order, so the results do not depend on
// the number of threads.
#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "ember/core/cpu/elementwise_loop.h"
#include "ember/core/cpu/reduce_loop.h"
#include "ember/core/ops/reduce.h"

namespace ember::cpu {
namespace {

using ops::ReduceCore;
using ops::ReducePost;
using ops::ReducePre;

constexpr int64_t kTile = 4096;        // elements per loaded tile (32 KiB of double)
constexpr int64_t kMaxBlock = 1024;    // outputs per unit: wide column blocks read whole pages
constexpr int64_t kUnitWork = 32768;   // elements per unit worth a thread
constexpr int64_t kTargetUnits = 256;  // units to aim for when outputs alone are too few
constexpr int kLanes = 8;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Folds map(x[i]) into kLanes independent accumulators, which the compiler vectorizes without
// reassociating, then folds the lanes pairwise.
template <class C, class Map, class Op>
C lane_fold(const C* x, int64_t n, C identity, const Map& map, const Op& op) {
  if (n < kLanes) {  // short runs (sum over a dim of size 4) skip the lane set-up
    C acc = identity;
    for (int64_t i = 0; i < n; ++i) acc = op(acc, map(x[i]));
    return acc;
  }
  C acc[kLanes];
  for (C& a : acc) a = identity;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = op(acc[l], map(x[i + l]));
  for (int l = 0; i < n; ++i, ++l) acc[l] = op(acc[l], map(x[i]));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = op(acc[l], acc[l + w]);
  return acc[0];
}

constexpr auto kIdentityMap = [](auto v) { return v; };
constexpr auto kPlus = [](auto a, auto b) { return a + b; };

// max (kMax) or min, NaN winning.
template <class C, bool kMax>
C nan_extreme(C a, C x) {
  return ops::extreme_beats(x, a, kMax) ? x : a;
}

// nan_extreme for an x that is not NaN (a NaN `a` is kept); unlike nan_extreme it vectorizes.
template <class C, bool kMax>
C plain_extreme(C a, C x) {
  return kMax ? std::max(a, x) : std::min(a, x);
}

template <class C>
bool has_nan(const C* x, int64_t n) {
  if constexpr (std::is_floating_point_v<C>) {
    // v - v is 0 unless v is NaN or infinite: a vectorized probe before the exact test.
    auto probe = [](C v) { return v - v; };
    return lane_fold(x, n, C(0), probe, kPlus) != 0 &&
           std::any_of(x, x + n, [](C v) { return v != v; });
  }
  return false;
}

// The max or min of x[0, n) folded into `init`, NaN if any element is NaN.
template <class C, bool kMax>
C extreme_of(const C* x, int64_t n, C init) {
  if (has_nan(x, n)) return std::numeric_limits<C>::quiet_NaN();
  return lane_fold(x, n, init, kIdentityMap, plain_extreme<C, kMax>);
}

// Folds the columns of a [rows x w] tile into m[0, w) by max or min, NaN winning.
template <class C, bool kMax>
void column_extremes(const C* x, int64_t rows, int64_t w, C* m) {
  auto fold = [&](auto op) {
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < w; ++j) m[j] = op(m[j], x[t * w + j]);
  };
  if (has_nan(x, rows * w)) fold(nan_extreme<C, kMax>);
  else fold(plain_extreme<C, kMax>);
}

// A reducer folds contiguous runs (fold_run: one state, elements at reduced positions
// r0, r0 + 1, ...) and tiles (fold_tile: row t of x, at position r0 + t, goes to states[0..w)),
// merges states, and reads the result of a state. Runs and tiles arrive in increasing r.

template <class C, bool kProd>
struct FoldReducer {  // sum and prod
  struct State {
    C v;
  };
  static C op(C a, C b) {
    if constexpr (std::is_integral_v<C>) {  // two's-complement wraparound without UB
      auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
      return static_cast<C>(kProd ? ua * ub : ua + ub);
    } else {
      return kProd ? a * b : a + b;
    }
  }
  static constexpr C kIdentity = kProd ? C(1) : C(0);

  State init() const { return {kIdentity}; }
  void fold_run(State& s, const C* x, int64_t n, int64_t) const {
    s.v = op(s.v, lane_fold(x, n, kIdentity, kIdentityMap, [](C a, C b) { return op(a, b); }));
  }
  void fold_tile(State* s, const C* x, int64_t rows, int64_t w, int64_t) const {
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < w; ++j) s[j].v = op(s[j].v, x[t * w + j]);
  }
  void merge(State& a, const State& b) const { a.v = op(a.v, b.v); }
  C value(const State& s) const { return s.v; }
};

template <class C, bool kMax, bool kIndex>
struct ExtremeReducer {  // max and min, with or without the index of the first extreme
  struct State {
    C v;
    int64_t i;  // -1 before the first element
  };
  using Limits = std::numeric_limits<C>;
  static constexpr C kLowest = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
  static constexpr C kHighest = Limits::has_infinity ? Limits::infinity() : Limits::max();
  static constexpr C kIdentity = kMax ? kLowest : kHighest;

  State init() const { return {kIdentity, -1}; }
  void fold_run(State& s, const C* x, int64_t n, int64_t r0) const {
    if (n == 0) return;
    C m = extreme_of<C, kMax>(x, n, kIdentity);
    if constexpr (kIndex) {
      if (s.i >= 0 && !ops::extreme_beats(m, s.v, kMax)) return;
      int64_t i = 0;
      while (!(x[i] == m || (x[i] != x[i] && m != m))) ++i;  // the first one; NaN matches NaN
      s = {m, r0 + i};
    } else {
      s.v = nan_extreme<C, kMax>(s.v, m);
    }
  }
  void fold_tile(State* s, const C* x, int64_t rows, int64_t w, int64_t r0) const {
    if constexpr (kIndex) {
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < w; ++j) {
          C v = x[t * w + j];
          if (s[j].i < 0 || ops::extreme_beats(v, s[j].v, kMax)) s[j] = {v, r0 + t};
        }
    } else {
      C m[kMaxBlock];
      for (int64_t j = 0; j < w; ++j) m[j] = s[j].v;
      column_extremes<C, kMax>(x, rows, w, m);
      for (int64_t j = 0; j < w; ++j) s[j].v = m[j];
    }
  }
  void merge(State& a, const State& b) const {
    if constexpr (kIndex) {
      // Slices may merge in any order: on a tie the smaller index wins.
      if (b.i >= 0 && (a.i < 0 || ops::extreme_beats(b.v, a.v, kMax) ||
                       (!ops::extreme_beats(a.v, b.v, kMax) && b.i < a.i)))
        a = b;
    } else {
      a.v = nan_extreme<C, kMax>(a.v, b.v);
    }
  }
  C value(const State& s) const { return s.v; }
  int64_t index(const State& s) const { return s.i; }
};

// Each run or tile column is reduced two-pass in the buffer (its mean, then its squared
// deviations), and the pieces are merged with Chan's formula: no cancellation of large means.
struct VarReducer {
  using State = ops::VarState;
  State init() const { return {}; }
  void fold_run(State& s, const double* x, int64_t n, int64_t) const {
    if (n == 0) return;
    double mean = lane_fold(x, n, 0.0, kIdentityMap, kPlus) / static_cast<double>(n);
    auto sq_dev = [mean](double v) { return (v - mean) * (v - mean); };
    ops::merge(s, {static_cast<double>(n), mean, lane_fold(x, n, 0.0, sq_dev, kPlus)});
  }
  void fold_tile(State* s, const double* x, int64_t rows, int64_t w, int64_t) const {
    double mean[kMaxBlock] = {}, m2[kMaxBlock] = {};
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < w; ++j) mean[j] += x[t * w + j];
    const double inv_rows = 1.0 / static_cast<double>(rows);
    for (int64_t j = 0; j < w; ++j) mean[j] *= inv_rows;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < w; ++j) {
        double d = x[t * w + j] - mean[j];
        m2[j] += d * d;
      }
    // Chan's merge, its ratios hoisted: every column has seen the same rows.
    const double na = s[0].n, n = na + static_cast<double>(rows);
    const double fb = static_cast<double>(rows) / n, fab = na * fb;
    for (int64_t j = 0; j < w; ++j) {
      double d = mean[j] - s[j].mean;
      s[j] = {n, s[j].mean + d * fb, s[j].m2 + m2[j] + d * d * fab};
    }
  }
  void merge(State& a, const State& b) const { ops::merge(a, b); }
  double value(const State& s) const { return s.m2; }
};

// exp(x) for x in [-708, 709] in plain arithmetic, so that loops over it vectorize (std::exp
// does not): x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite), exp(r) by Taylor to degree 13
// (truncation below 1e-17), times 2^k written into the exponent bits. About 1 ulp from std::exp.
inline double exp_in_range(double x) {
  constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 6.93147180369123816490e-01,
                   kLn2Lo = 1.90821492927058770002e-10, kShifter = 0x1.8p52;
  double t = x * kLog2e + kShifter;  // k in the low mantissa bits, rounded to nearest
  double k = t - kShifter;
  double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800 * r + 1.0 / 479001600;  // 1/13!, 1/12!, ...
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t scale = (std::bit_cast<int64_t>(t) - std::bit_cast<int64_t>(kShifter) + 1023) << 52;
  return p * std::bit_cast<double>(scale);
}

// logsumexp's terms exp(x - shift) for x <= shift. Terms below exp(-708) count as exp(-708),
// 3e-308, nothing next to the max's own term 1. The clamp has its own loop: GCC vectorizes
// neither loop with both in one.
template <class Shift>
void shifted_exp(const double* x, int64_t n, const Shift& shift, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::max(x[i] - shift(i), -708.0);
  for (int64_t i = 0; i < n; ++i) out[i] = exp_in_range(out[i]);
}

// Runs are reduced as (their max, sum of exp(x - max)) and merged. Tile columns rescale their
// running sum only when the max grows, so nearly every element costs one exp.
struct LseReducer {
  using State = ops::LseState;
  State init() const { return {}; }
  void fold_run(State& s, const double* x, int64_t n, int64_t) const {
    if (n == 0) return;
    double m = extreme_of<double, true>(x, n, -kInf);
    State piece{m, 0};
    if (std::isfinite(m)) {
      double e[kMaxBlock];
      for (int64_t i = 0; i < n; i += kMaxBlock) {
        int64_t len = std::min(kMaxBlock, n - i);
        shifted_exp(x + i, len, [m](int64_t) { return m; }, e);
        piece.sum += lane_fold(e, len, 0.0, kIdentityMap, kPlus);
      }
    }
    ops::merge(s, piece);
  }
  void fold_tile(State* s, const double* x, int64_t rows, int64_t w, int64_t) const {
    double m[kMaxBlock], shift[kMaxBlock], sum[kMaxBlock], e[kMaxBlock];
    for (int64_t j = 0; j < w; ++j) m[j] = s[j].max;
    column_extremes<double, true>(x, rows, w, m);
    for (int64_t j = 0; j < w; ++j) {
      bool finite = std::isfinite(m[j]);  // else m[j] is the answer and the sum is unused
      shift[j] = finite ? m[j] : 0;
      double rescale = m[j] == s[j].max ? 1 : std::exp(s[j].max - m[j]);
      sum[j] = finite ? s[j].sum * rescale : 0;
    }
    for (int64_t t = 0; t < rows; ++t) {
      shifted_exp(x + t * w, w, [&](int64_t j) { return shift[j]; }, e);
      for (int64_t j = 0; j < w; ++j) sum[j] += e[j];
    }
    for (int64_t j = 0; j < w; ++j) s[j] = {m[j], std::isfinite(m[j]) ? sum[j] : 0};
  }
  void merge(State& a, const State& b) const { ops::merge(a, b); }
  double value(const State& s) const { return ops::lse_value(s); }
};

template <class R>
concept IndexedReducer = requires(const R& r, const typename R::State& s) { r.index(s); };

template <class C>
void apply_pre(ReducePre pre, C* x, int64_t n, double p) {
  auto map = [&](auto kPre) {
    for (int64_t i = 0; i < n; ++i) x[i] = ops::reduce_pre(kPre.value, x[i], p);
  };
  switch (pre) {
    case ReducePre::None: return;
    case ReducePre::Abs: return map(std::integral_constant<ReducePre, ReducePre::Abs>{});
    case ReducePre::Square: return map(std::integral_constant<ReducePre, ReducePre::Square>{});
    case ReducePre::AbsPow: return map(std::integral_constant<ReducePre, ReducePre::AbsPow>{});
    case ReducePre::NonZero: return map(std::integral_constant<ReducePre, ReducePre::NonZero>{});
  }
}

// One kernel call's arguments.
struct ReduceCall {
  ops::ReducePlan plan;
  ops::ReduceParams p;
  const Tensor& out;
  const Tensor& indices;
  const Tensor& in;
  uint64_t mask;
};

template <class C, class R>
class ReduceRunner {
 public:
  using State = typename R::State;

  ReduceRunner(const R& r, const ReduceCall& c)
      : r_(r), plan_(c.plan), p_(c.p), g_(c.out, c.in, c.mask, c.indices.defined()), out_(c.out),
        indices_(c.indices), in_(c.in) {
    const int64_t inner = g_.inner_kept();
    // Columns when a kept dim walks memory faster than every reduced dim.
    columns_ = inner > 1 && g_.n_red > 1 && g_.kept_in.back() < g_.red_in.back();
    // Rows: short runs are batched, several outputs per tile.
    int64_t run = std::max<int64_t>(g_.inner_red(), 1);
    block_ = std::min({inner, kMaxBlock, columns_ ? kMaxBlock : std::max<int64_t>(1, kTile / run)});
    blocks_per_row_ = (inner + block_ - 1) / block_;
    n_blocks_ = g_.n_out / inner * blocks_per_row_;
    // Few output blocks: also split the reduced range, by the shapes alone.
    int64_t work = block_ * g_.n_red;
    slices_ = std::clamp<int64_t>(std::min(work / kUnitWork, kTargetUnits / n_blocks_), 1,
                                  std::max<int64_t>(g_.n_red, 1));
  }

  void run() {
    int64_t units = n_blocks_ * slices_;
    int64_t unit_work = std::max<int64_t>(1, block_ * g_.n_red / slices_);
    if (slices_ > 1) partials_.resize(static_cast<size_t>(slices_ * g_.n_out));
    parallel_for(0, units, std::max<int64_t>(1, kUnitWork / unit_work), [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) run_unit(u / slices_, u % slices_);
    });
    if (slices_ == 1) return;
    int64_t merge_grain = std::max<int64_t>(1, kUnitWork / (block_ * slices_));
    parallel_for(0, n_blocks_, merge_grain, [&](int64_t b, int64_t e) {
      for (int64_t blk = b; blk < e; ++blk) merge_slices(blk);
    });
  }

 private:
  struct Block {
    int64_t in_off, out_off, first_out, width;
  };

  Block block(int64_t blk) const {
    const int64_t inner = g_.inner_kept(), row = blk / blocks_per_row_;
    const int64_t j0 = blk % blocks_per_row_ * block_;
    Block k;
    g_.kept_row_offsets(row, k.in_off, k.out_off);
    k.in_off += j0 * g_.kept_in.back();
    k.out_off += j0 * g_.kept_out.back();
    k.first_out = row * inner + j0;
    k.width = std::min(block_, inner - j0);
    return k;
  }

  void run_unit(int64_t blk, int64_t slice) {
    Block k = block(blk);
    State states[kMaxBlock];
    for (int64_t j = 0; j < k.width; ++j) states[j] = r_.init();
    C buf[kTile];
    const int64_t es = static_cast<int64_t>(in_.element_size());
    const char* base = static_cast<const char*>(in_.data_ptr()) + k.in_off * es;
    const int64_t sk = g_.kept_in.back(), sr = g_.red_in.back();
    int64_t r0 = g_.n_red * slice / slices_, r1 = g_.n_red * (slice + 1) / slices_;
    g_.for_each_segment(r0, r1, kTile / k.width, [&](int64_t off, int64_t r, int64_t n) {
      const char* p = base + off * es;
      if (columns_) {
        load_tile(p, in_.dtype(), n, sr, k.width, sk, buf);
        apply_pre(plan_.pre, buf, n * k.width, p_.p);
        r_.fold_tile(states, buf, n, k.width, r);
      } else {
        load_tile(p, in_.dtype(), k.width, sk, n, sr, buf);
        apply_pre(plan_.pre, buf, n * k.width, p_.p);
        for (int64_t j = 0; j < k.width; ++j) r_.fold_run(states[j], buf + j * n, n, r);
      }
    });
    if (slices_ == 1) {
      emit(k, states);
    } else {
      std::copy(states, states + k.width, partials_.begin() + slice * g_.n_out + k.first_out);
    }
  }

  // Merges a block's slices in order (so the thread count does not matter) and writes them.
  void merge_slices(int64_t blk) const {
    Block k = block(blk);
    State states[kMaxBlock];
    for (int64_t j = 0; j < k.width; ++j) {
      states[j] = partials_[static_cast<size_t>(k.first_out + j)];
      for (int64_t s = 1; s < slices_; ++s)
        r_.merge(states[j], partials_[static_cast<size_t>(s * g_.n_out + k.first_out + j)]);
    }
    emit(k, states);
  }

  // Writes the results of a block's states (and their indices) into the outputs.
  void emit(const Block& k, const State* states) const {
    C vals[kMaxBlock];
    for (int64_t j = 0; j < k.width; ++j)
      vals[j] = ops::reduce_post(plan_.post, r_.value(states[j]), g_.n_red, p_);
    const int64_t ok = g_.kept_out.back();
    auto at = [&](const Tensor& t) {
      return static_cast<char*>(t.data_ptr()) + k.out_off * static_cast<int64_t>(t.element_size());
    };
    store_as(vals, at(out_), ok * static_cast<int64_t>(out_.element_size()), out_.dtype(), k.width);
    if constexpr (IndexedReducer<R>) {
      if (!indices_.defined()) return;
      int64_t idx[kMaxBlock];
      for (int64_t j = 0; j < k.width; ++j) idx[j] = r_.index(states[j]);
      store_as(idx, at(indices_), ok * static_cast<int64_t>(sizeof(int64_t)), kInt64, k.width);
    }
  }

  R r_;
  ops::ReducePlan plan_;
  ops::ReduceParams p_;
  ReduceGeometry g_;
  const Tensor& out_;
  const Tensor& indices_;
  const Tensor& in_;
  bool columns_ = false;
  int64_t block_ = 1, blocks_per_row_ = 1, n_blocks_ = 1, slices_ = 1;
  std::vector<State> partials_;  // [slice][output] when the reduced range is split
};

void reduce_kernel(ops::ReduceOp op, const Tensor& out, const Tensor& indices, const Tensor& in,
                   uint64_t mask, const ops::ReduceParams& p) {
  ReduceCall call{ops::reduce_plan(op, p), p, out, indices, in, mask};
  bool logical = op == ops::ReduceOp::All || op == ops::ReduceOp::Any;
  auto go = [&](auto tag) {
    using C = decltype(tag);
    auto run = [&](auto reducer) { ReduceRunner<C, decltype(reducer)>(reducer, call).run(); };
    bool indexed = indices.defined();
    switch (call.plan.core) {
      case ReduceCore::Sum: return run(FoldReducer<C, false>{});
      case ReduceCore::Prod: return run(FoldReducer<C, true>{});
      case ReduceCore::Max:
        return indexed ? run(ExtremeReducer<C, true, true>{}) : run(ExtremeReducer<C, true, false>{});
      case ReduceCore::Min:
        return indexed ? run(ExtremeReducer<C, false, true>{}) : run(ExtremeReducer<C, false, false>{});
      case ReduceCore::Var:
      case ReduceCore::LogSumExp: break;
    }
    if constexpr (std::is_same_v<C, double>)  // floating only (the frontend checks)
      return call.plan.core == ReduceCore::Var ? run(VarReducer{}) : run(LseReducer{});
  };
  if (is_floating_point(logical ? in.dtype() : out.dtype())) go(double{});
  else go(int64_t{});
}

KernelRegistrar<ReduceFn> reg_reduce(reduce_stub, kCPU, &reduce_kernel);

}  // namespace
}  // namespace ember::cpu
