#pragma once

// What the nn kernel files (softmax, normalization, loss, indexing, sort, pooling) share: the
// compute type of a stored dtype and conversions to it, 16-byte vectors, and reductions of small
// state structs (max and sum, Welford moments) over a warp or a block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cuda/std/limits>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "ember/core/dtype.h"
#include "ember/core/error.h"
#include "ember/cuda/device.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {

// Blocks a kernel with a per-block reduction aims for: a few per SM of an H100/H200.
constexpr int64_t kTargetBlocks = 1024;

template <class T>
struct AccType {
  using type = T;
};
template <>
struct AccType<Half> {
  using type = float;
};
template <>
struct AccType<BFloat16> {
  using type = float;
};
// f16 and bf16 compute in float, every other type in itself.
template <class T>
using Acc = typename AccType<T>::type;

template <class T>
__device__ __forceinline__ T to_acc(T v) {
  return v;
}
__device__ __forceinline__ float to_acc(Half v) { return __half2float(__ushort_as_half(v.x)); }
__device__ __forceinline__ float to_acc(BFloat16 v) { return __bfloat162float(__ushort_as_bfloat16(v.x)); }

template <class T>
__device__ __forceinline__ T from_acc(Acc<T> v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ Half from_acc<Half>(float v) {
  return Half::from_bits(__half_as_ushort(__float2half_rn(v)));
}
template <>
__device__ __forceinline__ BFloat16 from_acc<BFloat16>(float v) {
  return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
}

// Element i of a floating tensor of runtime dtype `dt` as C (for ops whose inputs may differ in
// dtype: one kernel instead of one per combination).
template <class C>
__device__ __forceinline__ C load_float_as(const void* p, ScalarType dt, int64_t i) {
  switch (dt) {
    case ScalarType::Float16:
      return static_cast<C>(to_acc(static_cast<const Half*>(p)[i]));
    case ScalarType::BFloat16:
      return static_cast<C>(to_acc(static_cast<const BFloat16*>(p)[i]));
    case ScalarType::Float32:
      return static_cast<C>(static_cast<const float*>(p)[i]);
    default:
      return static_cast<C>(static_cast<const double*>(p)[i]);
  }
}

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }

template <class A>
__device__ __forceinline__ A infinity() {
  return ::cuda::std::numeric_limits<A>::infinity();
}

// Calls f(T{}) for the floating dtypes (Half, BFloat16, float, double); `op` names the caller
// in the error for any other dtype (the frontends reject those first).
template <class F>
decltype(auto) visit_float_dtype(const char* op, ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float16:
      return f(Half{});
    case ScalarType::BFloat16:
      return f(BFloat16{});
    case ScalarType::Float32:
      return f(float{});
    case ScalarType::Float64:
      return f(double{});
    default:
      EMBER_CHECK(false, op, ": no CUDA kernel for dtype ", t);
  }
  return f(float{});
}

// Calls f(float{}) or f(double{}) for tensors in a compute dtype (statistics, losses).
template <class F>
decltype(auto) visit_compute_dtype(const char* op, ScalarType t, F&& f) {
  if (t == kFloat64) return f(double{});
  EMBER_CHECK(t == kFloat32, op, ": expected a float32 or float64 compute tensor, got ", t);
  return f(float{});
}

// N elements of T loaded or stored as one 16-byte (or smaller) access.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// A vector's elements in the compute type. Pairs of bf16 and f16 convert from their 32-bit word:
// a bf16 is the high half of its float, so one shift or mask each, where element-wise conversion
// first moves each half into its own register.
template <class T, int N>
__device__ __forceinline__ Vec<Acc<T>, N> to_acc(const Vec<T, N>& x) {
  Vec<Acc<T>, N> r;
  if constexpr (std::is_same_v<T, BFloat16> && N % 2 == 0) {
    const auto* w = reinterpret_cast<const uint32_t*>(x.v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      r.v[2 * i] = __uint_as_float(w[i] << 16);
      r.v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else if constexpr (std::is_same_v<T, Half> && N % 2 == 0) {
    const auto* h = reinterpret_cast<const __half2*>(x.v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float2 f = __half22float2(h[i]);
      r.v[2 * i] = f.x, r.v[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) r.v[j] = to_acc(x.v[j]);
  }
  return r;
}

// A vector of compute-type values rounded to T. Pairs of bf16 and f16 round in one instruction
// (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32) and land in their 32-bit word as they are stored.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> from_acc(const Vec<Acc<T>, N>& x) {
  Vec<T, N> r;
  if constexpr ((std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)&&N % 2 == 0) {
    auto* w = reinterpret_cast<uint32_t*>(r.v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      if constexpr (std::is_same_v<T, BFloat16>) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(x.v[2 * i], x.v[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __half2 h = __floats2half2_rn(x.v[2 * i], x.v[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) r.v[j] = from_acc<T>(x.v[j]);
  }
  return r;
}

// Elements per 16-byte access, when every row start is 16-byte aligned (rows of `len` elements
// from `ptrs`), else 1.
template <class T>
int vector_width(int64_t len, std::initializer_list<const void*> ptrs) {
  constexpr int kWidth = 16 / sizeof(T);
  bool ok = len % kWidth == 0;
  for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok ? kWidth : 1;
}

// f(std::integral_constant<int, VEC>{}) with VEC = vector_width<T>(len, ptrs): one call site
// instantiates both the vector and the scalar path.
template <class T, class F>
void with_vector_width(int64_t len, std::initializer_list<const void*> ptrs, F&& f) {
  if (vector_width<T>(len, ptrs) > 1)
    f(std::integral_constant<int, 16 / sizeof(T)>{});
  else
    f(std::integral_constant<int, 1>{});
}

// The elements of a row before its first 16-byte boundary: read one by one by the vector paths.
template <class T>
__device__ __forceinline__ int64_t unaligned_head(const T* row, int64_t len) {
  return min(len, static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(row) % 16) % 16 / sizeof(T)));
}

// f(i, x) for the elements x (as Acc<T>) of row[0, len) that thread t of a group of g threads
// owns, except whole 16-byte vectors, which go to fv(i, v) with v their VEC elements as Acc<T>
// from i on. With VEC > 1 the row is read in 16-byte vectors from its first 16-byte boundary on,
// the elements before it and after the last whole vector one by one: rows of any length and start
// (a 30522-word vocabulary's logits) read at full width.
template <class T, int VEC, class F, class FV>
__device__ __forceinline__ void for_each_vec_in_row(const T* row, int64_t len, int t, int g, F&& f, FV&& fv) {
  if constexpr (VEC > 1) {
    const int64_t head = unaligned_head(row, len);
    for (int64_t i = t; i < head; i += g) f(i, to_acc(row[i]));
    const int64_t nvec = (len - head) / VEC;
    const auto* vrow = reinterpret_cast<const Vec<T, VEC>*>(row + head);
    for (int64_t v = t; v < nvec; v += g) {
      const Vec<T, VEC> x = vrow[v];
      Acc<T> a[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) a[j] = to_acc(x.v[j]);
      fv(head + v * VEC, a);
    }
    for (int64_t i = head + nvec * VEC + t; i < len; i += g) f(i, to_acc(row[i]));
  } else {
    for (int64_t i = t; i < len; i += g) f(i, to_acc(row[i]));
  }
}

// for_each_vec_in_row with f for every element.
template <class T, int VEC, class F>
__device__ __forceinline__ void for_each_in_row(const T* row, int64_t len, int t, int g, F&& f) {
  for_each_vec_in_row<T, VEC>(row, len, t, g, f, [&](int64_t i, const Acc<T>(&a)[VEC]) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) f(i + j, a[j]);
  });
}

// The VEC elements that start S elements into the aligned vector a and go on into the next one, b.
template <int S, class T, int VEC>
__device__ __forceinline__ Vec<T, VEC> splice_at(const Vec<T, VEC>& a, const Vec<T, VEC>& b) {
  Vec<T, VEC> r;
#pragma unroll
  for (int j = 0; j < VEC; ++j) r.v[j] = j + S < VEC ? a.v[j + S] : b.v[j + S - VEC];
  return r;
}

// splice_at for a shift known at run time (the same across a row, so the branch is uniform):
// each case moves registers only.
template <class T, int VEC, int S = 1>
__device__ __forceinline__ Vec<T, VEC> splice(const Vec<T, VEC>& a, const Vec<T, VEC>& b, int shift) {
  if constexpr (S >= VEC)
    return a;
  else
    return shift == S ? splice_at<S>(a, b) : splice<T, VEC, S + 1>(a, b, shift);
}

// out[i] = f(i, in[i]) over the elements of a row that thread t of g owns. With VEC > 1 the row is
// split at out's 16-byte boundaries (as for_each_in_row splits it at its own); where in lies at
// another offset from them (contiguous logits and their gradient in padded rows), each of its
// vectors is spliced from the two aligned ones it straddles, both holding an element of the row.
template <class T, int VEC, class F>
__device__ __forceinline__ void map_row(const T* in, T* out, int64_t len, int t, int g, F&& f) {
  if constexpr (VEC > 1) {
    const int64_t head = unaligned_head(out, len);
    for (int64_t i = t; i < head; i += g) out[i] = from_acc<T>(f(i, to_acc(in[i])));
    const int64_t nvec = (len - head) / VEC;
    const int shift = static_cast<int>(reinterpret_cast<uintptr_t>(in + head) % 16 / sizeof(T));
    const auto* vin = reinterpret_cast<const Vec<T, VEC>*>(in + head - shift);
    auto* vout = reinterpret_cast<Vec<T, VEC>*>(out + head);
    for (int64_t v = t; v < nvec; v += g) {
      Vec<T, VEC> x = shift == 0 ? vin[v] : splice(vin[v], vin[v + 1], shift), y;
#pragma unroll
      for (int j = 0; j < VEC; ++j) y.v[j] = from_acc<T>(f(head + v * VEC + j, to_acc(x.v[j])));
      vout[v] = y;
    }
    for (int64_t i = head + nvec * VEC + t; i < len; i += g) out[i] = from_acc<T>(f(i, to_acc(in[i])));
  } else {
    for (int64_t i = t; i < len; i += g) out[i] = from_acc<T>(f(i, to_acc(in[i])));
  }
}

// f(i, a_i, b_i) over the elements of two rows of the same length and alignment, split as
// for_each_in_row splits one.
template <class T, int VEC, class F>
__device__ __forceinline__ void for_each_in_rows(const T* a, const T* b, int64_t len, int t, int g, F&& f) {
  if constexpr (VEC > 1) {
    const auto* va = reinterpret_cast<const Vec<T, VEC>*>(a);
    const auto* vb = reinterpret_cast<const Vec<T, VEC>*>(b);
    for (int64_t v = t; v < len / VEC; v += g) {
      Vec<T, VEC> x = va[v], y = vb[v];
#pragma unroll
      for (int j = 0; j < VEC; ++j) f(v * VEC + j, to_acc(x.v[j]), to_acc(y.v[j]));
    }
  } else {
    for (int64_t i = t; i < len; i += g) f(i, to_acc(a[i]), to_acc(b[i]));
  }
}

// out[i] = f(i, a[i], b[i]) over the same elements.
template <class T, int VEC, class F>
__device__ __forceinline__ void map_rows(const T* a, const T* b, T* out, int64_t len, int t, int g, F&& f) {
  if constexpr (VEC > 1) {
    const auto* va = reinterpret_cast<const Vec<T, VEC>*>(a);
    const auto* vb = reinterpret_cast<const Vec<T, VEC>*>(b);
    auto* vout = reinterpret_cast<Vec<T, VEC>*>(out);
    for (int64_t v = t; v < len / VEC; v += g) {
      Vec<T, VEC> x = va[v], y = vb[v], r;
#pragma unroll
      for (int j = 0; j < VEC; ++j) r.v[j] = from_acc<T>(f(v * VEC + j, to_acc(x.v[j]), to_acc(y.v[j])));
      vout[v] = r;
    }
  } else {
    for (int64_t i = t; i < len; i += g) out[i] = from_acc<T>(f(i, to_acc(a[i]), to_acc(b[i])));
  }
}

// --- Reductions of a state S over a warp or a block. S is trivially constructible (it lives in
// __shared__ arrays), has S::identity() and S::shfl_xor(offset), and Combine merges two. ---

template <class S, class Combine>
__device__ __forceinline__ S warp_allreduce(S s, Combine combine) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) s = combine(s, s.shfl_xor(offset));
  return s;
}

// Every thread of the block gets the result; `shared` holds kWarpSize states. Call from all
// threads of the block.
template <class S, class Combine>
__device__ __forceinline__ S block_allreduce(S s, Combine combine, S* shared) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  s = warp_allreduce(s, combine);
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = s;
  __syncthreads();
  if (warp == 0) {
    S v = lane < nwarps ? shared[lane] : S::identity();
    v = warp_allreduce(v, combine);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

template <class A>
__device__ __forceinline__ A shfl_xor(A v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}

// Mean and sum of squared deviations of n values (Welford), merged with Chan's formula: stable
// when |mean| >> std, unlike sum and sum of squares.
template <class A>
struct Welford {
  A mean, m2, n;

  __device__ static Welford identity() { return {A(0), A(0), A(0)}; }
  __device__ void add(A x) {
    n += A(1);
    A d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  __device__ Welford shfl_xor(int offset) const {
    return {cuda::shfl_xor(mean, offset), cuda::shfl_xor(m2, offset), cuda::shfl_xor(n, offset)};
  }
};

struct WelfordCombine {
  template <class A>
  __device__ Welford<A> operator()(const Welford<A>& a, const Welford<A>& b) const {
    if (b.n == A(0)) return a;
    if (a.n == A(0)) return b;
    A n = a.n + b.n, d = b.mean - a.mean, wb = b.n / n;
    return {a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb, n};
  }
};

// --- Rows: max and sum of exp, and the launch shape of a kernel with a group of threads per row. ---

// exp(x - m), with exp(-inf - m) = 0 even for m = -inf: a masked element adds nothing, while a
// row of only -inf still ends up 0 / 0 = NaN (as on the CPU and in PyTorch).
template <class A>
__device__ __forceinline__ A exp_minus(A x, A m) {
  return x == -infinity<A>() ? A(0) : exp_(x - m);
}

// exp(x - m) for x from, or results of, dtype T, with m not -inf. For f16 and bf16 the fast exp
// (ex2.approx of (x - m) log2 e: relative error ~1e-6, far below their precision) instead of
// expf's eight or so instructions: on those types instructions, not bytes, bound the row kernels.
template <class T, class A>
__device__ __forceinline__ A exp_minus_as(A x, A m) {
  if constexpr (sizeof(T) == 2)
    return __expf(x - m);
  else
    return exp_(x - m);
}

// Running max m and sum s of exp(x - m), merged by rescaling to the larger max.
template <class A>
struct MaxSum {
  A m, s;

  __device__ static MaxSum identity() { return {-infinity<A>(), A(0)}; }
  __device__ void add(A x) {
    if (x > m) {
      s = s * exp_minus(m, x) + exp_minus(x, x);  // exp_minus(x, x) is NaN for x = inf, as on the CPU
      m = x;
    } else {
      s += exp_minus(x, m);  // NaN inputs land here and make the row NaN
    }
  }
  // add() for N elements of dtype T at once: one rescale to their max, then one exp each by
  // exp_minus_as<T>, with no test for -inf (exp(-inf - m) is 0 for any m but -inf). add() pays for
  // both branches' exps per element where the compiler predicates them, and a branch around each.
  template <class T, int N>
  __device__ void add_all(const A (&x)[N]) {
    A vm = x[0];
#pragma unroll
    for (int j = 1; j < N; ++j) vm = fmax(vm, x[j]);  // NaN only if all are: each reaches s below
    if (vm > m) {
      s = s * exp_minus(m, vm);
      m = vm;
    }
    if (m == -infinity<A>()) {  // every element so far is -inf (or NaN, which must reach s)
#pragma unroll
      for (int j = 0; j < N; ++j) s += exp_minus(x[j], m);
      return;
    }
#pragma unroll
    for (int j = 0; j < N; ++j) s += exp_minus_as<T>(x[j], m);  // exp(inf - inf) is NaN, as add()'s
  }
  __device__ MaxSum shfl_xor(int offset) const {
    return {cuda::shfl_xor(m, offset), cuda::shfl_xor(s, offset)};
  }
};

// The max and sum of exp of the elements of row[0, len) that thread t of a group of g owns
// (for_each_vec_in_row's), before the group's reduction.
template <class T, int VEC>
__device__ __forceinline__ MaxSum<Acc<T>> row_max_sum(const T* row, int64_t len, int t, int g) {
  MaxSum<Acc<T>> st = MaxSum<Acc<T>>::identity();
  for_each_vec_in_row<T, VEC>(
      row, len, t, g, [&](int64_t, Acc<T> v) { st.add(v); },
      [&](int64_t, const Acc<T>(&a)[VEC]) { st.template add_all<T>(a); });
  return st;
}

struct MaxSumCombine {
  template <class A>
  __device__ MaxSum<A> operator()(const MaxSum<A>& a, const MaxSum<A>& b) const {
    A m = a.m > b.m ? a.m : b.m;
    return {m, a.s * exp_minus(a.m, m) + b.s * exp_minus(b.m, m)};
  }
};

constexpr int64_t kWarpRowMax = 1024;  // longest row a warp handles alone
constexpr int kWarpsPerBlock = 4;

inline int pow2_ceil(int64_t v, int cap) {
  int p = 1;
  while (p < v && p < cap) p *= 2;
  return p;
}

// Rows of K elements: `launch(warp_per_row, grid, threads)` with a warp per row up to kWarpRowMax
// elements, else a block per row of about 8 vectors per thread (whole warps, at most 1024).
template <int VEC, class F>
void launch_rows(int64_t rows, int64_t K, F&& launch) {
  if (K <= kWarpRowMax) {
    launch(std::true_type{}, grid_for(rows, kWarpsPerBlock), kWarpsPerBlock * kWarpSize);
  } else {
    const int64_t want = ceil_div<int64_t>(ceil_div<int64_t>(K, VEC), 8);
    const int threads =
        static_cast<int>(std::min<int64_t>(1024, ceil_div<int64_t>(want, kWarpSize) * kWarpSize));
    launch(std::false_type{}, grid_for(rows, 1), threads);
  }
  EMBER_CUDA_LAUNCH_CHECK();
}

// --- Rows held in registers: each row is read from memory once. ---

// Elements of a row one thread keeps in registers: a warp holds rows of up to 32 times as many,
// a block of 1024 threads rows of up to 1024 times as many.
template <class T>
inline constexpr int kRowRegs = sizeof(T) == 8 ? 16 : 32;

// How a row kernel splits rows among threads: a warp or a block per row with the row in
// registers, or a block per row that reads it twice (rows longer than its registers hold).
enum class RowSplit { kWarp, kBlock, kBlockTwoPass };

// Thread t of a group of g threads, which takes rows first, first + step, ... Every thread of a
// group runs the same iterations: the reductions need all of them.
template <RowSplit S>
struct RowGroup {
  static constexpr bool kWarpGroup = S == RowSplit::kWarp;
  int t, g;
  int64_t first, step;

  __device__ RowGroup()
      : t(kWarpGroup ? threadIdx.x % kWarpSize : threadIdx.x),
        g(kWarpGroup ? kWarpSize : blockDim.x),
        first(kWarpGroup ? blockIdx.x * static_cast<int64_t>(blockDim.x / kWarpSize) + threadIdx.x / kWarpSize
                         : blockIdx.x),
        step(kWarpGroup ? static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize) : gridDim.x) {}

  // The reduction of v over the group, for every thread of it; `shared` holds kWarpSize values.
  template <class A, class Op>
  __device__ A allreduce(A v, Op op, A identity, A* shared) const {
    return kWarpGroup ? warp_reduce(v, op) : block_reduce(v, op, identity, shared);
  }
  // The same for a state (see warp_allreduce).
  template <class St, class Combine>
  __device__ St allreduce(St s, Combine combine, St* shared) const {
    return kWarpGroup ? warp_allreduce(s, combine) : block_allreduce(s, combine, shared);
  }
};

// f(k, v) for the register slots k of thread t of a group of g: vector v = t + k g of a row of
// nvec vectors, for the slots that exist.
template <int kSlots, class F>
__device__ __forceinline__ void for_each_slot(int64_t nvec, int t, int g, F&& f) {
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int64_t v = t + static_cast<int64_t>(k) * g;
    if (v < nvec) f(k, v);
  }
}

// The part of a row (vectors of VEC elements) that one thread holds.
template <class T, int VEC>
struct RowRegs {
  static constexpr int kSlots = kRowRegs<T> / VEC;
  Vec<T, VEC> v[kSlots];

  __device__ void load(const T* row, int64_t nvec, int t, int g) {
    const auto* p = reinterpret_cast<const Vec<T, VEC>*>(row);
    for_each_slot<kSlots>(nvec, t, g, [&](int k, int64_t i) { v[k] = p[i]; });
  }
  // Element j of slot k, or the whole slot, in the compute type. Measured on the H200: softmax
  // runs faster with whole slots (4% in bf16), layer_norm with elements (its bf16 kernels took
  // more instructions with slots and ran 8% slower).
  __device__ Acc<T> at(int k, int j) const { return to_acc(v[k].v[j]); }
  __device__ Vec<Acc<T>, VEC> acc(int k) const { return to_acc(v[k]); }
};

// p[i, i + VEC) (i a multiple of VEC; p 16-byte aligned when VEC > 1), 16 bytes at a time:
// per-column parameters (layer_norm's weight and bias) next to a row's vector of VEC elements.
template <int VEC, class A>
__device__ __forceinline__ Vec<A, VEC> load_columns(const A* p, int64_t i) {
  constexpr int kPer = sizeof(A) >= 16 ? 1 : static_cast<int>(16 / sizeof(A));
  Vec<A, VEC> r;
  if constexpr (VEC >= kPer && VEC % kPer == 0) {
#pragma unroll
    for (int q = 0; q < VEC / kPer; ++q) {
      const Vec<A, kPer> c = reinterpret_cast<const Vec<A, kPer>*>(p + i)[q];
#pragma unroll
      for (int j = 0; j < kPer; ++j) r.v[q * kPer + j] = c.v[j];
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = p[i + j];
  }
  return r;
}

// out[c] = f(c, k, j) over the elements c of the thread's slots (element j of slot k).
template <class T, int VEC, int kSlots, class F>
__device__ __forceinline__ void store_slots(T* out, int64_t nvec, int t, int g, F&& f) {
  auto* p = reinterpret_cast<Vec<T, VEC>*>(out);
  for_each_slot<kSlots>(nvec, t, g, [&](int k, int64_t v) {
    Vec<T, VEC> r;
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = from_acc<T>(f(v * VEC + j, k, j));
    p[v] = r;
  });
}

// Most threads per block `kernel` can launch with (its registers decide), in whole warps.
template <class K>
int max_block_threads(K kernel) {
  cudaFuncAttributes attr{};
  EMBER_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return attr.maxThreadsPerBlock / kWarpSize * kWarpSize;
}

// Blocks of `kernel` that run at once on the current device at `threads` per block. The runtime
// is asked once per kernel, block size and device: the query is host time on every launch else.
inline int64_t resident_blocks(const void* kernel, int threads) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int>, int64_t> cache;
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, added] = cache.try_emplace({kernel, threads, device}, 0);
  if (added) {
    int per_sm = 0;
    EMBER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    it->second =
        static_cast<int64_t>(std::max(per_sm, 1)) * get_device_properties(device).multi_processor_count;
  }
  return it->second;
}

// Rows of K elements of T too long for a warp's registers, through the kernel `kernel_of(split)`
// (split a std::integral_constant<RowSplit, ...>): calls launch(kernel, split, grid, threads) with
// a block per row of just enough whole warps to hold it, else the largest block the kernel
// allows, reading rows twice.
template <class T, class KernelOf, class F>
void launch_block_row_kernel(int64_t rows, int64_t K, KernelOf&& kernel_of, F&& launch) {
  constexpr int R = kRowRegs<T>;
  using Block = std::integral_constant<RowSplit, RowSplit::kBlock>;
  using TwoPass = std::integral_constant<RowSplit, RowSplit::kBlockTwoPass>;
  // Asked once per kernel, not on every call.
  static const int block_max = max_block_threads(kernel_of(Block{}));
  static const int two_pass_max = max_block_threads(kernel_of(TwoPass{}));
  const int64_t threads = ceil_div<int64_t>(ceil_div<int64_t>(K, R), kWarpSize) * kWarpSize;
  if (threads <= block_max)
    launch(kernel_of(Block{}), Block{}, grid_for(rows, 1), static_cast<int>(threads));
  else
    launch(kernel_of(TwoPass{}), TwoPass{}, grid_for(rows, 1), two_pass_max);
}

// The same for rows of any length: a warp per row (`warps` per block) while the row fits a warp's
// registers, else as launch_block_row_kernel.
template <class T, class KernelOf, class F>
void launch_row_kernel(int64_t rows, int64_t K, int warps, KernelOf&& kernel_of, F&& launch) {
  using Warp = std::integral_constant<RowSplit, RowSplit::kWarp>;
  if (K <= kWarpSize * kRowRegs<T>)
    launch(kernel_of(Warp{}), Warp{}, grid_for(rows, warps), warps * kWarpSize);
  else
    launch_block_row_kernel<T>(rows, K, kernel_of, launch);
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace ember::cuda
