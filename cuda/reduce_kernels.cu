// The CUDA reduction kernel, on the CPU's geometry (core/cpu/reduce_loop.h: kept and reduced dims,
// each sorted by input stride and coalesced) and the shared math (core/ops/reduce_functors.h:
// pre-map, core state, post-map). Floating results accumulate in double and integer ones in
// int64 (wrapping), as the CPU kernel does, so the two agree to the last bits of the dtype.
//
// One kernel, two thread layouts:
//  - rows (the reduced dims walk memory fastest, e.g. a contiguous inner-dim reduce): threadIdx.x
//    walks the reduced range of one output (a warp or a block per row, coalesced; 16-byte loads
//    of contiguous float rows), threadIdx.y the outputs; warp shuffles, then shared memory
//    across warps.
//  - columns (a kept dim walks memory fastest, e.g. sum over dim 0 of [4096, 4096]): threadIdx.x
//    walks consecutive outputs (coalesced; 16-byte loads of 2 to 8 outputs a thread where the
//    outputs are consecutive floats), threadIdx.y the reduced range; a shared-memory tree.
// When outputs alone do not fill the GPU (a full reduction to a scalar above all), blockIdx.y cuts
// the reduced range into slices whose states go to a workspace, and a second kernel merges each
// output's slices in a fixed order: no atomics, and the same result on every run.
#include "ember/core/cpu/reduce_loop.h"
#include "ember/core/factories.h"
#include "ember/core/ops/reduce.h"
#include "ember/cuda/elementwise.cuh"

namespace ember::cuda {
namespace {

using ops::ReduceCore;

constexpr int kThreads = 256;
constexpr int kMinPerThread = 16;  // reduced elements per thread before a slice is worth its merge
constexpr int64_t kMaxSlices = 1024;

struct ReduceArgs {
  const char* in;
  char* out;
  int64_t* indices;  // null unless max/min with indices
  void* partials;    // [slice][output] states when slices > 1
  ScalarType in_dtype, out_dtype;
  int64_t in_es, out_es;
  // Kept dims (one output each) and reduced dims, innermost first, strides in elements.
  int nkept, nred;
  int64_t kept_sizes[kMaxDims], kept_in[kMaxDims], kept_out[kMaxDims];
  IntDivider red_sizes[kMaxDims];
  int64_t red_in[kMaxDims];
  int64_t n_out, n_red;
  int64_t slices;
  bool columns;
  bool contiguous_rows;  // rows layout over one reduced dim of stride 1: vectorized loads
  int vec_columns;       // columns layout, outputs consecutive in memory: reduce_columns_vec_kernel's
                         // outputs per thread (0: not used)
  ops::ReducePlan plan;
  ops::ReduceParams p;
};

__device__ __forceinline__ void output_offsets(const ReduceArgs& a, int64_t j, int64_t& in_off,
                                               int64_t& out_off) {
  if (a.nkept == 1) {
    in_off = j * a.kept_in[0];
    out_off = j * a.kept_out[0];
    return;
  }
  in_off = out_off = 0;
  for (int d = 0; d < a.nkept; ++d) {
    const int64_t q = j / a.kept_sizes[d], i = j - q * a.kept_sizes[d];
    in_off += i * a.kept_in[d];
    out_off += i * a.kept_out[d];
    j = q;
  }
}

// The input offset of reduced position r (row-major over the reduced dims); several reduced dims
// only occur with n_red < 2^31 (the host makes sure).
__device__ __forceinline__ int64_t reduced_offset(const ReduceArgs& a, int64_t r) {
  if (a.nred == 1) return r * a.red_in[0];
  auto i = static_cast<uint32_t>(r);
  int64_t off = 0;
  for (int d = 0; d < a.nred; ++d) {
    const uint32_t q = a.red_sizes[d].div(i);
    off += static_cast<int64_t>(i - q * a.red_sizes[d].divisor) * a.red_in[d];
    i = q;
  }
  return off;
}

// --- Reducers: a state, its identity, folding one (pre-mapped) element at reduced position r,
// merging two states, and the state's value (and index). ---

template <class C>
__device__ __forceinline__ C wrapping_add(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

template <class C>
__device__ __forceinline__ C wrapping_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

template <class C>
struct SumReducer {
  using Compute = C;
  using State = C;
  __device__ State init() const { return C(0); }
  __device__ void fold(State& s, C x, int64_t) const { s = wrapping_add(s, x); }
  __device__ void merge(State& s, const State& o) const { s = wrapping_add(s, o); }
  __device__ C value(const State& s) const { return s; }
};

template <class C>
struct ProdReducer {
  using Compute = C;
  using State = C;
  __device__ State init() const { return C(1); }
  __device__ void fold(State& s, C x, int64_t) const { s = wrapping_mul(s, x); }
  __device__ void merge(State& s, const State& o) const { s = wrapping_mul(s, o); }
  __device__ C value(const State& s) const { return s; }
};

template <class C, bool kMax>
__device__ __forceinline__ C extreme_identity() {
  if constexpr (std::is_floating_point_v<C>)
    return kMax ? -INFINITY : INFINITY;
  else
    return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
}

// max or min; NaN wins (ops::extreme_beats).
template <class C, bool kMax>
struct ExtremeReducer {
  using Compute = C;
  using State = C;
  __device__ State init() const { return extreme_identity<C, kMax>(); }
  __device__ void fold(State& s, C x, int64_t) const {
    if (ops::extreme_beats(x, s, kMax)) s = x;
  }
  __device__ void merge(State& s, const State& o) const { fold(s, o, 0); }
  __device__ C value(const State& s) const { return s; }
};

// max or min with the index of the first extreme (the first NaN, if any).
template <class C, bool kMax>
struct IndexedExtremeReducer {
  using Compute = C;
  struct State {
    C v;
    int64_t i;  // -1 before the first element
  };
  __device__ State init() const { return {extreme_identity<C, kMax>(), -1}; }
  // Positions arrive in increasing order within a thread: only a strictly better one replaces.
  __device__ void fold(State& s, C x, int64_t r) const {
    if (s.i < 0 || ops::extreme_beats(x, s.v, kMax)) s = {x, r};
  }
  // States merge in any order: on a tie the smaller index wins.
  __device__ void merge(State& s, const State& o) const {
    if (o.i >= 0 &&
        (s.i < 0 || ops::extreme_beats(o.v, s.v, kMax) || (!ops::extreme_beats(s.v, o.v, kMax) && o.i < s.i)))
      s = o;
  }
  __device__ C value(const State& s) const { return s.v; }
  __device__ int64_t index(const State& s) const { return s.i; }
};

// Welford within a thread, Chan's merge across threads and slices.
struct VarReducer {
  using Compute = double;
  using State = ops::VarState;
  __device__ State init() const { return {}; }
  __device__ void fold(State& s, double x, int64_t) const {
    s.n += 1;
    const double d = x - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (x - s.mean);
  }
  __device__ void merge(State& s, const State& o) const { ops::merge(s, o); }
  __device__ double value(const State& s) const { return s.m2; }
};

// log-sum-exp as (max, sum of exp(x - max)), one exp per element; non-finite maxima as ops::merge.
struct LseReducer {
  using Compute = double;
  using State = ops::LseState;
  __device__ State init() const { return {}; }
  __device__ void fold(State& s, double x, int64_t) const {
    if (x != x || x > s.max) {
      if (isfinite(x)) {
        s.sum = s.sum * exp(s.max - x) + 1;
        s.max = x;
      } else {
        s = {x, 0};
      }
    } else if (isfinite(s.max)) {
      s.sum += exp(x - s.max);
    }
  }
  __device__ void merge(State& s, const State& o) const { ops::merge(s, o); }
  __device__ double value(const State& s) const { return ops::lse_value(s); }
};

template <class R>
concept Indexed = requires(const R& r, const typename R::State& s) {
  r.index(s);
};

// --- Combining the states of a block's threads ---

// A state shuffled across lanes as 32-bit words.
template <class S>
__device__ __forceinline__ S shfl_xor(const S& s, int mask) {
  static_assert(sizeof(S) % 4 == 0);
  uint32_t w[sizeof(S) / 4];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (auto& v : w) v = __shfl_xor_sync(0xffffffffu, v, mask);
  S out;
  memcpy(&out, w, sizeof(S));
  return out;
}

// Merges the states of each group of `width` consecutive lanes (a power of 2 up to 32) into
// its first lane.
template <class R>
__device__ __forceinline__ void warp_merge(const R& red, typename R::State& s, int width) {
  for (int off = width / 2; off > 0; off /= 2) red.merge(s, shfl_xor(s, off));
}

// Merges the states of the threads that share an output; the result is valid in the thread with
// reduced lane 0. Called by every thread of the block.
template <class R>
__device__ __forceinline__ typename R::State block_merge(const R& red, typename R::State s, bool columns,
                                                         typename R::State* sm) {
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  if (columns) {  // the reduced lanes are y: a tree through shared memory
    if (by == 1) return s;
    sm[ty * bx + tx] = s;
    __syncthreads();
    for (int h = by / 2; h > 0; h /= 2) {
      if (ty < h) red.merge(sm[ty * bx + tx], sm[(ty + h) * bx + tx]);
      __syncthreads();
    }
    return sm[tx];
  }
  // The reduced lanes are x: shuffles within each warp, then across the warps of a row.
  warp_merge(red, s, bx < kWarpSize ? bx : kWarpSize);
  if (bx <= kWarpSize) return s;
  const int warps = bx / kWarpSize;
  if (tx % kWarpSize == 0) sm[ty * warps + tx / kWarpSize] = s;
  __syncthreads();
  if (tx < kWarpSize) {
    s = tx < warps ? sm[ty * warps + tx] : red.init();
    warp_merge(red, s, warps);
  }
  return s;
}

// --- Kernels ---

// Folds elements [r0, r1) of a contiguous row into this thread's state, the thread taking every
// `step`-th one from `lane`: a head up to the first 16-byte boundary, then 16-byte vectors, then
// the tail. A thread's positions still increase, as the indexed reducers need.
template <class R, class T>
__device__ __forceinline__ void fold_row(const R& red, typename R::State& s, const ReduceArgs& a,
                                         const T* row, int64_t r0, int64_t r1, int lane, int step) {
  using C = typename R::Compute;
  constexpr int kVec = 16 / sizeof(T);
  auto fold = [&](T v, int64_t r) { red.fold(s, ops::reduce_pre(a.plan.pre, convert<C>(v), a.p.p), r); };
  const auto misaligned = reinterpret_cast<uintptr_t>(row + r0) % 16;
  const int64_t head_end = r0 + static_cast<int64_t>((16 - misaligned) % 16 / sizeof(T));
  const int64_t a0 = head_end < r1 ? head_end : r1;
  for (int64_t r = r0 + lane; r < a0; r += step) fold(row[r], r);
  const int64_t nvec = (r1 - a0) / kVec;
  const auto* vecs = reinterpret_cast<const AlignedVec<T, kVec>*>(row + a0);
  for (int64_t k = lane; k < nvec; k += step) {
    const AlignedVec<T, kVec> v = vecs[k];
#pragma unroll
    for (int j = 0; j < kVec; ++j) fold(v.v[j], a0 + k * kVec + j);
  }
  for (int64_t r = a0 + nvec * kVec + lane; r < r1; r += step) fold(row[r], r);
}

// fold_row for the float inputs of training (float32, float16, bfloat16; the host sets
// contiguous_rows only for them): other dtypes take the strided loop, which keeps the number of
// instantiations down.
template <class R>
__device__ __forceinline__ void fold_float_row(const R& red, typename R::State& s, const ReduceArgs& a,
                                               const char* base, int64_t r0, int64_t r1, int lane, int step) {
  if constexpr (std::is_same_v<typename R::Compute, double>) {
    if (a.in_dtype == ScalarType::Float32)
      fold_row(red, s, a, reinterpret_cast<const float*>(base), r0, r1, lane, step);
    else if (a.in_dtype == ScalarType::Float16)
      fold_row(red, s, a, reinterpret_cast<const Half*>(base), r0, r1, lane, step);
    else
      fold_row(red, s, a, reinterpret_cast<const BFloat16*>(base), r0, r1, lane, step);
  }
}

template <class R>
__device__ __forceinline__ void emit(const R& red, const ReduceArgs& a, int64_t j,
                                     const typename R::State& s) {
  int64_t in_off, out_off;
  output_offsets(a, j, in_off, out_off);
  store_as(a.out + out_off * a.out_es, a.out_dtype,
           ops::reduce_post(a.plan.post, red.value(s), a.n_red, a.p));
  if constexpr (Indexed<R>) {
    if (a.indices) a.indices[out_off] = red.index(s);
  }
}

template <class R>
__global__ void __launch_bounds__(kThreads) reduce_kernel(ReduceArgs a, R red) {
  using C = typename R::Compute;
  using State = typename R::State;
  __shared__ alignas(16) unsigned char smem[kThreads * sizeof(State)];
  const int o_lane = a.columns ? threadIdx.x : threadIdx.y, o_count = a.columns ? blockDim.x : blockDim.y;
  const int r_lane = a.columns ? threadIdx.y : threadIdx.x, r_count = a.columns ? blockDim.y : blockDim.x;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * o_count + o_lane;
  const int64_t r0 = a.n_red * blockIdx.y / a.slices, r1 = a.n_red * (blockIdx.y + 1) / a.slices;
  State s = red.init();
  if (j < a.n_out) {
    int64_t in_off, out_off;
    output_offsets(a, j, in_off, out_off);
    const char* base = a.in + in_off * a.in_es;
    if (a.contiguous_rows) {
      fold_float_row(red, s, a, base, r0, r1, r_lane, r_count);
    } else {
      for (int64_t r = r0 + r_lane; r < r1; r += r_count) {
        const C x = load_as<C>(base + reduced_offset(a, r) * a.in_es, a.in_dtype);
        red.fold(s, ops::reduce_pre(a.plan.pre, x, a.p.p), r);
      }
    }
  }
  s = block_merge(red, s, a.columns, reinterpret_cast<State*>(smem));
  if (r_lane != 0 || j >= a.n_out) return;
  if (a.slices == 1)
    emit(red, a, j, s);
  else
    static_cast<State*>(a.partials)[blockIdx.y * a.n_out + j] = s;
}

// The columns layout where the outputs are consecutive in memory (sum over dim 0 of a row-major
// [M, N] float matrix: the bias gradient): each thread owns kVec consecutive outputs and reads
// them with one load per row (16 bytes where rows are 16-byte aligned, else a pair of elements),
// so a warp reads up to 512 contiguous bytes a row instead of 32 scattered elements. Positions
// still increase within a thread.
template <class R, class T, int kVec>
__global__ void __launch_bounds__(kThreads) reduce_columns_vec_kernel(ReduceArgs a, R red) {
  using C = typename R::Compute;
  using State = typename R::State;
  __shared__ alignas(16) unsigned char smem[kThreads * sizeof(State)];
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  const int64_t r0 = a.n_red * blockIdx.y / a.slices, r1 = a.n_red * (blockIdx.y + 1) / a.slices;
  State s[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) s[k] = red.init();
  if (j0 < a.n_out) {
    const T* base = reinterpret_cast<const T*>(a.in) + j0;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
      const AlignedVec<T, kVec> v = *reinterpret_cast<const AlignedVec<T, kVec>*>(base + r * a.red_in[0]);
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        red.fold(s[k], ops::reduce_pre(a.plan.pre, convert<C>(v.v[k]), a.p.p), r);
    }
  }
  for (int k = 0; k < kVec; ++k) {
    const State m = block_merge(red, s[k], true, reinterpret_cast<State*>(smem));
    if (threadIdx.y == 0 && j0 < a.n_out) {
      if (a.slices == 1)
        emit(red, a, j0 + k, m);
      else
        static_cast<State*>(a.partials)[blockIdx.y * a.n_out + j0 + k] = m;
    }
    __syncthreads();  // the next merge reuses the shared memory
  }
}

// One warp per output merges its slices: lanes take slices in turn, then a shuffle tree.
template <class R>
__global__ void __launch_bounds__(kThreads) merge_slices_kernel(ReduceArgs a, R red) {
  using State = typename R::State;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (j >= a.n_out) return;  // whole warps
  State s = red.init();
  const auto* parts = static_cast<const State*>(a.partials);
  for (int64_t k = lane; k < a.slices; k += kWarpSize) red.merge(s, parts[k * a.n_out + j]);
  warp_merge(red, s, kWarpSize);
  if (lane == 0) emit(red, a, j, s);
}

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Calls f(element, width) for reduce_columns_vec_kernel when it applies (vec_columns set by the
// host: 16 bytes or a pair) and returns true, else returns false: double-state reducers without
// indices only, to keep instantiations down.
template <class R, class F>
bool visit_vec_columns(const ReduceArgs& a, F&& f) {
  if constexpr (std::is_same_v<typename R::Compute, double> && !Indexed<R>) {
    auto width = [&](auto tag) {
      using T = decltype(tag);
      if (a.vec_columns == 2)
        f(tag, std::integral_constant<int, 2>{});
      else
        f(tag, std::integral_constant<int, 16 / sizeof(T)>{});
    };
    if (a.vec_columns == 0) return false;
    if (a.in_dtype == ScalarType::Float32) return width(float{}), true;
    if (a.in_dtype == ScalarType::Float16) return width(Half{}), true;
    return width(BFloat16{}), true;
  }
  return false;
}

template <class R>
void launch(ReduceArgs a, const R& red, Device device) {
  using State = typename R::State;
  // Outputs per thread: kVec in the vectorized columns layout, else one.
  int64_t per_thread = 1;
  visit_vec_columns<R>(a, [&](auto, auto width) { per_thread = width; });
  const int64_t n_lanes = ceil_div(a.n_out, per_thread);
  const int64_t o_count = a.columns ? std::min<int64_t>(kWarpSize, pow2_at_least(n_lanes))
                                    : kThreads / std::min<int64_t>(kThreads, pow2_at_least(a.n_red));
  const int64_t r_count = kThreads / o_count;
  const int64_t blocks = ceil_div(n_lanes, o_count);
  // Too few output blocks for the GPU: slice the reduced range too.
  const int64_t target = 4LL * multiprocessor_count();
  a.slices = blocks >= target ? 1 : std::min(ceil_div(target, blocks), a.n_red / (r_count * kMinPerThread));
  a.slices = std::clamp<int64_t>(a.slices, 1, kMaxSlices);
  Tensor workspace;
  if (a.slices > 1) {
    workspace = empty({a.slices * a.n_out * static_cast<int64_t>(sizeof(State))},
                      TensorOptions(kUInt8).device(device));
    a.partials = workspace.data_ptr();
  }
  EMBER_CHECK(blocks <= INT32_MAX, "reduce: ", a.n_out, " outputs are too many for one launch");
  const dim3 block(static_cast<unsigned>(a.columns ? o_count : r_count),
                   static_cast<unsigned>(a.columns ? r_count : o_count));
  cudaStream_t stream = current_stream();
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.slices));
  if (!visit_vec_columns<R>(a, [&](auto tag, auto width) {
        reduce_columns_vec_kernel<R, decltype(tag), width><<<grid, block, 0, stream>>>(a, red);
      }))
    reduce_kernel<R><<<grid, block, 0, stream>>>(a, red);
  EMBER_CUDA_LAUNCH_CHECK();
  if (a.slices > 1) {
    merge_slices_kernel<R>
        <<<grid_for(a.n_out, kThreads / kWarpSize, INT32_MAX), kThreads, 0, stream>>>(a, red);
    EMBER_CUDA_LAUNCH_CHECK();
  }
}

// Calls f(reducer) for the plan's core in compute type C.
template <class C, class F>
void visit_reducer(ReduceCore core, bool indexed, F&& f) {
  switch (core) {
    case ReduceCore::Sum:
      return f(SumReducer<C>{});
    case ReduceCore::Prod:
      return f(ProdReducer<C>{});
    case ReduceCore::Max:
      return indexed ? f(IndexedExtremeReducer<C, true>{}) : f(ExtremeReducer<C, true>{});
    case ReduceCore::Min:
      return indexed ? f(IndexedExtremeReducer<C, false>{}) : f(ExtremeReducer<C, false>{});
    case ReduceCore::Var:
    case ReduceCore::LogSumExp:
      break;
  }
  if constexpr (std::is_same_v<C, double>) {  // floating only (the frontend checks)
    if (core == ReduceCore::Var) return f(VarReducer{});
    return f(LseReducer{});
  }
}

void reduce(ops::ReduceOp op, const Tensor& out, const Tensor& indices, const Tensor& in, uint64_t mask,
            const ops::ReduceParams& p) {
  const bool indexed = indices.defined();
  const cpu::ReduceGeometry g(out, in, mask, indexed);
  if (g.kept_sizes.size() > kMaxDims || g.red_sizes.size() > kMaxDims ||
      (g.red_sizes.size() > 1 && g.n_red > INT32_MAX)) {
    // Kept dims first and reduced dims last, made contiguous: each group becomes one dim.
    DimVector perm;
    uint64_t permuted_mask = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t d = 0; d < in.dim(); ++d)
        if (static_cast<int>(mask >> d & 1) == pass) {
          if (pass == 1) permuted_mask |= uint64_t{1} << perm.size();
          perm.push_back(d);
        }
    return reduce(op, out.permute(perm), indexed ? indices.permute(perm) : Tensor(),
                  in.detach().permute(perm).contiguous(), permuted_mask, p);
  }
  ReduceArgs a{};
  a.in = static_cast<const char*>(in.data_ptr());
  a.out = static_cast<char*>(out.data_ptr());
  a.indices = indexed ? indices.data_ptr<int64_t>() : nullptr;
  a.in_dtype = in.dtype();
  a.out_dtype = out.dtype();
  a.in_es = static_cast<int64_t>(in.element_size());
  a.out_es = static_cast<int64_t>(out.element_size());
  a.nkept = static_cast<int>(g.kept_sizes.size());
  a.nred = static_cast<int>(g.red_sizes.size());
  for (int d = 0; d < a.nkept; ++d) {  // the geometry is outermost first
    const size_t s = static_cast<size_t>(a.nkept - 1 - d);
    a.kept_sizes[d] = g.kept_sizes[s];
    a.kept_in[d] = g.kept_in[s];
    a.kept_out[d] = g.kept_out[s];
  }
  for (int d = 0; d < a.nred; ++d) {
    const size_t s = static_cast<size_t>(a.nred - 1 - d);
    a.red_sizes[d] = IntDivider(a.nred > 1 ? static_cast<uint32_t>(g.red_sizes[s]) : 1u);
    a.red_in[d] = g.red_in[s];
  }
  a.n_out = g.n_out;
  a.n_red = g.n_red;
  a.columns = g.inner_kept() > 1 && g.n_red > 1 && g.kept_in.back() < g.red_in.back();
  a.plan = ops::reduce_plan(op, p);
  a.p = p;
  const bool logical = op == ops::ReduceOp::All || op == ops::ReduceOp::Any;
  auto run = [&](const auto& red) { launch(a, red, in.device()); };
  if (is_floating_point(logical ? in.dtype() : out.dtype())) {
    const ScalarType t = in.dtype();
    const bool float_in = t == kFloat32 || t == kFloat16 || t == kBFloat16;
    a.contiguous_rows = !a.columns && a.nred == 1 && a.red_in[0] == 1 && g.n_red >= 64 && float_in;
    if (a.columns && float_in && a.nkept == 1 && a.kept_in[0] == 1 && a.nred == 1)
      for (int64_t vec : {16 / a.in_es, int64_t{2}})
        if (a.vec_columns == 0 && a.n_out % vec == 0 && a.red_in[0] % vec == 0 &&
            reinterpret_cast<uintptr_t>(a.in) % (vec * a.in_es) == 0)
          a.vec_columns = static_cast<int>(vec);
    visit_reducer<double>(a.plan.core, indexed, run);
  } else {
    visit_reducer<int64_t>(a.plan.core, indexed, run);
  }
}

KernelRegistrar<ReduceFn> reg_reduce(reduce_stub, kCUDA, &reduce);

}  // namespace
}  // namespace ember::cuda
