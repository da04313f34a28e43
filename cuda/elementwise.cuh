#pragma once

// The generic CUDA elementwise launcher (STYLE.md #5): out = f(in...) for a host/device functor f
// of compute type C (core/ops/elementwise_functors.h), over an ElementwisePlan.
//  - vectorized: every operand contiguous (or a scalar) and 16-byte aligned, in a float storage
//    type (float, Half, BFloat16): 16-byte loads and stores, grid-stride, 32-bit indices (a
//    launch per 2^31 elements).
//  - strided: anything else (broadcast, strided, mixed dtypes): an offset calculator over up to
//    kMaxDims collapsed dims with 32-bit index math (the plan cuts bigger index spaces into
//    several launches), each operand read as its runtime dtype and converted to C.
// Scalars (0-dim inputs) are one value per thread: passed by value from the host, or read once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "ember/core/cpu/line_loop.h"
#include "ember/core/dtype.h"
#include "ember/cuda/elementwise_plan.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {

// --- Conversions: storage <-> compute types, with the hardware's round-to-nearest-even for the
// 16-bit floats (the same results as core/half.h's software conversions). ---

template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, Half>) {
    return convert<To>(__half2float(__ushort_as_half(v.x)));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return convert<To>(__bfloat162float(__ushort_as_bfloat16(v.x)));
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half::from_bits(__half_as_ushort(__float2half_rn(static_cast<float>(v))));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v))));
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(T{}) for the C++ type of t, in device code.
template <class F>
__device__ __forceinline__ decltype(auto) visit_dtype_device(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool:
      return f(bool{});
    case ScalarType::UInt8:
      return f(uint8_t{});
    case ScalarType::Int32:
      return f(int32_t{});
    case ScalarType::Int64:
      return f(int64_t{});
    case ScalarType::Float16:
      return f(Half{});
    case ScalarType::BFloat16:
      return f(BFloat16{});
    case ScalarType::Float32:
      return f(float{});
    case ScalarType::Float64:
      break;
  }
  return f(double{});
}

// Reads an element of runtime dtype t as C.
template <class C>
__device__ __forceinline__ C load_as(const char* p, ScalarType t) {
  return visit_dtype_device(
      t, [p](auto tag) -> C { return convert<C>(*reinterpret_cast<const decltype(tag)*>(p)); });
}

// Writes v into an element of runtime dtype t.
template <class V>
__device__ __forceinline__ void store_as(char* p, ScalarType t, V v) {
  visit_dtype_device(t, [p, v](auto tag) {
    using T = decltype(tag);
    *reinterpret_cast<T*>(p) = convert<T>(v);
  });
}

// --- Index math ---

// Division by a runtime constant as a multiply-high and a shift (Granlund and Montgomery), for
// dividends and divisors below 2^31.
struct IntDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;
  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    while (shift < 32 && (1u << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

// Byte offsets of each of NT operands at a linear index (innermost dim first).
template <int NT>
struct OffsetCalc {
  int ndim = 0;
  IntDivider sizes[kMaxDims];
  int64_t strides[kMaxDims][NT];

  OffsetCalc() = default;
  explicit OffsetCalc(const LaunchChunk& c) : ndim(c.ndim) {
    for (int d = 0; d < c.ndim; ++d) {
      sizes[d] = IntDivider(static_cast<uint32_t>(c.sizes[d]));
      for (int k = 0; k < NT; ++k) strides[d][k] = c.strides[d][k];
    }
  }

  __device__ __forceinline__ void get(uint32_t i, int64_t (&off)[NT]) const {
#pragma unroll
    for (int k = 0; k < NT; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      uint32_t q = sizes[d].div(i);
      int64_t r = i - q * sizes[d].divisor;
#pragma unroll
      for (int k = 0; k < NT; ++k) off[k] += r * strides[d][k];
      i = q;
    }
  }
};

// --- Kernel arguments ---

// Operand 0 is the output, 1..N the inputs. Scalar inputs hold their value (host) or are read
// once per thread (device).
template <int N, class C>
struct ElementwiseArgs {
  char* data[N + 1];
  ScalarType dtype[N + 1];
  ScalarKind scalar[N + 1];
  C host_value[N > 0 ? N : 1];
};

// How a strided kernel reads and writes operands: converting from and to the runtime dtype, or
// moving raw elements of one size (copies and fills that need no conversion).
template <class C>
struct CastIO {
  using Compute = C;
  static __device__ __forceinline__ C load(const char* p, ScalarType t) { return load_as<C>(p, t); }
  template <class V>
  static __device__ __forceinline__ void store(char* p, ScalarType t, V v) {
    store_as(p, t, v);
  }
};

template <class U>
struct RawIO {
  using Compute = U;
  static __device__ __forceinline__ U load(const char* p, ScalarType) {
    return *reinterpret_cast<const U*>(p);
  }
  static __device__ __forceinline__ void store(char* p, ScalarType, U v) { *reinterpret_cast<U*>(p) = v; }
};

template <class IO, int N, class C>
__device__ __forceinline__ void load_scalars(const ElementwiseArgs<N, C>& a, C (&s)[N > 0 ? N : 1]) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    s[k] = a.scalar[k + 1] == ScalarKind::Host
               ? a.host_value[k]
               : (a.scalar[k + 1] == ScalarKind::Device ? IO::load(a.data[k + 1], a.dtype[k + 1]) : C{});
}

template <class F, class C, size_t... I>
__device__ __forceinline__ auto apply(const F& f, const C* x, std::index_sequence<I...>) {
  return f(x[I]...);
}

constexpr int kElementwiseBlock = 128;

// --- The strided kernel ---

template <class IO, int N, class F>
__global__ void __launch_bounds__(kElementwiseBlock)
    strided_kernel(uint32_t n, OffsetCalc<N + 1> calc, ElementwiseArgs<N, typename IO::Compute> a, F f) {
  using C = typename IO::Compute;
  C s[N > 0 ? N : 1];
  load_scalars<IO>(a, s);
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N + 1];
    calc.get(i, off);
    C x[N > 0 ? N : 1];
#pragma unroll
    for (int k = 0; k < N; ++k)
      x[k] =
          a.scalar[k + 1] != ScalarKind::None ? s[k] : IO::load(a.data[k + 1] + off[k + 1], a.dtype[k + 1]);
    IO::store(a.data[0] + off[0], a.dtype[0], apply(f, x, std::make_index_sequence<N>{}));
  }
}

template <int N, class C>
ElementwiseArgs<N, C> make_args(const ElementwisePlan& plan, const LaunchChunk* chunk) {
  ElementwiseArgs<N, C> a{};
  for (int k = 0; k <= N; ++k) {
    a.data[k] = chunk ? chunk->data[k] : plan.data(k);
    a.dtype[k] = plan.dtype(k);
    a.scalar[k] = plan.scalar(k);
    if (k > 0 && plan.scalar(k) == ScalarKind::Host) {
      if constexpr (std::is_arithmetic_v<C>) a.host_value[k - 1] = plan.host_value(k).to<C>();
    }
  }
  return a;
}

template <class IO, int N, class F>
void launch_strided(const ElementwisePlan& plan, const F& f) {
  EMBER_CHECK(plan.ntensors() == N + 1, "elementwise: plan has ", plan.ntensors(), " operands, kernel ",
              N + 1);
  cudaStream_t stream = current_stream();
  plan.for_each_chunk([&](const LaunchChunk& c) {
    auto n = static_cast<uint32_t>(c.numel);
    strided_kernel<IO, N><<<grid_for(n, kElementwiseBlock), kElementwiseBlock, 0, stream>>>(
        n, OffsetCalc<N + 1>(c), make_args<N, typename IO::Compute>(plan, &c), f);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// --- The vectorized kernel ---

template <class T, int VEC>
struct alignas(sizeof(T) * VEC) AlignedVec {
  T v[VEC];
};

template <int VEC, class C, class T>
__device__ __forceinline__ void load_lanes(const char* base, uint32_t v, bool scalar, C s, C (&x)[VEC]) {
  if (scalar) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) x[j] = s;
  } else {
    AlignedVec<T, VEC> in = reinterpret_cast<const AlignedVec<T, VEC>*>(base)[v];
#pragma unroll
    for (int j = 0; j < VEC; ++j) x[j] = convert<C>(in.v[j]);
  }
}

// Vectors v0, v0 + stride, ... (U of them, those below nvec): all loads first, then the math and
// the stores, so that each thread has U loads in flight while it computes.
template <int VEC, int U, class Out, class C, class F, class... In, size_t... K>
__device__ __forceinline__ void vector_steps(const ElementwiseArgs<sizeof...(In), C>& a, const C* s,
                                             uint32_t v0, uint32_t stride, uint32_t nvec, const F& f,
                                             std::index_sequence<K...>) {
  constexpr int N = sizeof...(In);
  C x[U][N > 0 ? N : 1][VEC];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (const uint32_t v = v0 + u * stride; v < nvec)
      (load_lanes<VEC, C, In>(a.data[K + 1], v, a.scalar[K + 1] != ScalarKind::None, s[K], x[u][K]), ...);
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (const uint32_t v = v0 + u * stride; v < nvec) {
      AlignedVec<Out, VEC> out;
#pragma unroll
      for (int j = 0; j < VEC; ++j) out.v[j] = convert<Out>(f(x[u][K][j]...));
      reinterpret_cast<AlignedVec<Out, VEC>*>(a.data[0])[v] = out;
    }
}

template <class Out, class C, class F, class... In, size_t... K>
__device__ __forceinline__ void scalar_step(const ElementwiseArgs<sizeof...(In), C>& a, const C* s,
                                            uint32_t i, const F& f, std::index_sequence<K...>) {
  reinterpret_cast<Out*>(a.data[0])[i] = convert<Out>(f(
      (a.scalar[K + 1] != ScalarKind::None ? s[K]
                                           : convert<C>(reinterpret_cast<const In*>(a.data[K + 1])[i]))...));
}

// Vectors per thread and loop step of the vectorized kernel: four for unary ops of 2-byte floats,
// two beyond (registers grow with the operands and the element size). Measured on the H200 over
// 256M elements: GELU f32 with four float4s took 40 registers (75% occupancy) and 521 us, with two
// 32 registers and 506 us; GELU bf16 with four vectors of 8 took 278 us, with two 299 us.
template <int N, int VEC>
inline constexpr int kVectorUnroll = N <= 1 && VEC >= 8 ? 4 : 2;

// Elements per launch of the vectorized kernel: its indices fit 32 bits, with a third of int64's
// address math (GELU f32's loop: 474 instructions per 16 elements, 514 with int64); bigger tensors
// take several launches.
constexpr int64_t kVectorizedChunk = int64_t{1} << 31;

// Blocks per SM the vectorized kernel is compiled for: 16 (at most 32 registers, full occupancy)
// for 4-byte floats, where f32 GELU's backward otherwise took 48 registers; unset (0) for 2-byte
// floats, where the caps tried measured slower (GELU bf16 with 16 blocks at one or two vectors a
// thread: 320 us, against 278 us uncapped at four).
template <int VEC>
inline constexpr int kVectorMinBlocks = VEC >= 8 ? 0 : 16;

template <int VEC, class Out, class C, class F, class... In>
__global__ void __launch_bounds__(kElementwiseBlock, kVectorMinBlocks<VEC>)
    vectorized_kernel(uint32_t n, ElementwiseArgs<sizeof...(In), C> a, F f) {
  constexpr int N = sizeof...(In), U = kVectorUnroll<N, VEC>;
  C s[N > 0 ? N : 1];
  load_scalars<CastIO<C>>(a, s);
  const uint32_t nvec = n / VEC, tile = blockDim.x * U;
  for (uint32_t v = blockIdx.x * tile + threadIdx.x; v < nvec; v += gridDim.x * tile)
    vector_steps<VEC, U, Out, C, F, In...>(a, s, v, blockDim.x, nvec, f, std::index_sequence_for<In...>{});
  // The tail (fewer than VEC elements): one element per thread.
  if (const uint32_t i = nvec * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n)
    scalar_step<Out, C, F, In...>(a, s, i, f, std::index_sequence_for<In...>{});
}

template <class Out, class C, class F, class... In>
void launch_vectorized(const ElementwisePlan& plan, const F& f) {
  constexpr int N = sizeof...(In);
  constexpr size_t kWidest = std::max({sizeof(Out), sizeof(In)...});
  constexpr int kVec = static_cast<int>(16 / kWidest);
  constexpr size_t kSizes[] = {sizeof(Out), sizeof(In)...};
  auto args = make_args<N, C>(plan, nullptr);
  const int64_t n = plan.numel();
  for (int64_t first = 0; first < n; first += kVectorizedChunk) {
    const int64_t len = std::min(kVectorizedChunk, n - first);
    const int64_t tiles = ceil_div<int64_t>(len / kVec, int64_t{kVectorUnroll<N, kVec>});
    vectorized_kernel<kVec, Out, C, F, In...>
        <<<grid_for(std::max<int64_t>(tiles, 1), kElementwiseBlock), kElementwiseBlock, 0,
           current_stream()>>>(static_cast<uint32_t>(len), args, f);
    EMBER_CUDA_LAUNCH_CHECK();
    // The next chunk: 2^31 elements, a multiple of 16 bytes, keeps the operands aligned.
    for (int k = 0; k <= N; ++k)
      if (plan.scalar(k) == ScalarKind::None)
        args.data[k] += kVectorizedChunk * static_cast<int64_t>(kSizes[k]);
  }
}

// Whether the plan's operands have exactly the static types Out, In... and are aligned for
// VEC-wide accesses of them.
template <class Out, class... In, size_t... K>
bool matches_vectorized(const ElementwisePlan& plan, std::index_sequence<K...>) {
  constexpr size_t kWidest = std::max({sizeof(Out), sizeof(In)...});
  constexpr int kVec = static_cast<int>(16 / kWidest);
  auto ok = [&](int k, ScalarType t, size_t size) {
    return plan.scalar(k) != ScalarKind::None ||
           (plan.dtype(k) == t && plan.aligned(k, static_cast<int>(size) * kVec));
  };
  return plan.contiguous() && ok(0, dtype_of<Out>, sizeof(Out)) &&
         (ok(K + 1, dtype_of<In>, sizeof(In)) && ...);
}

// --- The typed entry point ---

struct Identity {
  template <class T>
  __host__ __device__ T operator()(T x) const {
    return x;
  }
};

template <class... T>
struct TypeList {};

// The storage types with a vectorized kernel for compute type C: the floats of training. Other
// compute types (double, int64, bool) take the strided kernel, which also covers contiguous
// tensors at one offset computation per element.
template <class C>
struct VectorizedStorages {
  using type = TypeList<>;
};
template <>
struct VectorizedStorages<float> {
  using type = TypeList<float, Half, BFloat16>;
};

// The storage of input K in a vectorized kernel over storage S: S for every input, or (where)
// bool for the condition.
struct SameStorage {
  template <int K, class S>
  using type = S;
};
struct BoolThenStorage {
  template <int K, class S>
  using type = std::conditional_t<K == 0, bool, S>;
};

template <size_t, class T>
using Repeat = T;

// out = f(in...) vectorized with the operands in exactly the storage types Out, In...; false,
// nothing launched, when the plan's dtypes, layout or alignment differ.
template <class C, class Out, class... In, class F>
bool try_vectorized_as(const ElementwisePlan& plan, const F& f) {
  if (!matches_vectorized<Out, In...>(plan, std::index_sequence_for<In...>{})) return false;
  launch_vectorized<Out, C, F, In...>(plan, f);
  return true;
}

template <class C, class Inputs, class F, class S, size_t... K>
bool try_vectorized_storage(const ElementwisePlan& plan, const F& f, std::index_sequence<K...>) {
  using R = decltype(f(std::declval<Repeat<K, C>>()...));
  using Out = std::conditional_t<std::is_same_v<R, bool>, bool, S>;
  return try_vectorized_as<C, Out, typename Inputs::template type<K, S>...>(plan, f);
}

template <class C, int N, class Inputs, class F, class... S>
bool try_vectorized(const ElementwisePlan& plan, const F& f, TypeList<S...>) {
  return (try_vectorized_storage<C, Inputs, F, S>(plan, f, std::make_index_sequence<N>{}) || ...);
}

// out = f(in_1, ..., in_N) over `plan`, the inputs read as C and f's result stored into the
// output's dtype.
template <class C, int N, class Inputs = SameStorage, class F>
void gpu_kernel(const ElementwisePlan& plan, const F& f) {
  if (plan.numel() == 0) return;
  if (try_vectorized<C, N, Inputs>(plan, f, typename VectorizedStorages<C>::type{})) return;
  launch_strided<CastIO<C>, N>(plan, f);
}

// The dtype visitors of the CPU kernels: the compute type for a result dtype (float for
// f32/f16/bf16, double, int64 for the integers, bool); visit_element_size is core/dtype.h's.
using cpu::visit_compute_type;

}  // namespace ember::cuda
