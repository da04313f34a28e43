// CUDA kernels of the indexing ops and embedding. gather reads through any strides. scatter_add
// adds with atomics (a CAS loop on the enclosing word for 1-byte types), or in deterministic mode
// a thread per line along dim in index order (floats only: integer sums do not depend on the
// order). scatter keeps the CPU's rule that the last write in index order wins: short lines go a
// thread per line; long ones take a first pass that records, per destination, the largest
// position along dim that writes it (atomicMax), and a second that lets only that one write. Every index is
// checked as it is read (IndexCheck): a bad one reads 0 or writes nothing, and its error is raised at the
// next synchronization. index_range is a min/max reduction whose result comes back to the host, for the few
// ops that need index values there.
#include <climits>

#include "ember/core/deterministic.h"
#include "ember/core/factories.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/indexing.h"
#include "ember/cuda/device_error.cuh"
#include "ember/cuda/nn_kernel_util.cuh"
#include "ember/cuda/offset_calc.cuh"
#include "ember/cuda/sync_debug.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

#define EMBER_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// `t` with stride 0 along dim: the first element of each line.
DimVector strides_without(const Tensor& t, int64_t dim) {
  DimVector s(t.strides());
  s[dim] = 0;
  return s;
}

// --- gather: out[p] = self[p with p[dim] = index[p]] over index's shape. ---

template <class U>
__global__ void gather_kernel(U* out, const U* self, const int64_t* index, OffsetCalc<3> oc, int64_t step,
                              int64_t n, IndexCheck check) {
  EMBER_GRID_STRIDE(i, n) {
    int64_t off[3];
    oc.get(i, off);
    const int64_t k = index[off[2]];
    out[off[0]] = check.ok(k) ? self[off[1] + k * step] : U{};
  }
}

void gather_cuda(const char* op, const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const DimVector self_strides = strides_without(self, dim);
  const OffsetCalc<3> oc =
      make_offset_calc<3>("gather", index.sizes(), {out.strides(), self_strides, index.strides()});
  const int64_t n = index.numel();
  cudaStream_t stream = current_stream();
  visit_element_size(out.element_size(), [&](auto tag) {
    using U = decltype(tag);
    gather_kernel<U><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<U*>(out.data_ptr()), static_cast<const U*>(self.data_ptr()),
        static_cast<const int64_t*>(index.data_ptr()), oc, self.stride(dim), n,
        index_check(op, dim, self.size(dim)));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// --- scatter ---

// dst = f(dst) atomically for a 1-byte dst, through a CAS on the aligned word that holds it.
template <class F>
__device__ void atomic_update_byte(uint8_t* dst, F f) {
  auto* word = reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(dst) & ~uintptr_t{3});
  const unsigned shift = (reinterpret_cast<uintptr_t>(dst) & 3u) * 8u;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    const unsigned cur = (assumed >> shift) & 0xffu;
    const unsigned next = static_cast<unsigned>(f(static_cast<uint8_t>(cur))) & 0xffu;
    old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (next << shift));
  } while (assumed != old);
}

// *dst += a * v with the CPU kernel's arithmetic (in Acc, int64 for the integers).
__device__ void atomic_add(float* dst, float a, float v) { atomicAdd(dst, a * v); }
__device__ void atomic_add(double* dst, double a, double v) { atomicAdd(dst, a * v); }
__device__ void atomic_add(Half* dst, float a, Half v) {
  atomicAdd(reinterpret_cast<__half*>(dst), __float2half_rn(a * to_acc(v)));
}
__device__ void atomic_add(BFloat16* dst, float a, BFloat16 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(dst), __float2bfloat16_rn(a * to_acc(v)));
}
__device__ void atomic_add(int32_t* dst, int64_t a, int32_t v) {
  atomicAdd(reinterpret_cast<int*>(dst), static_cast<int>(a * v));  // wraps as the CPU's cast does
}
__device__ void atomic_add(int64_t* dst, int64_t a, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(a * v));
}
__device__ void atomic_add(uint8_t* dst, int64_t a, uint8_t v) {
  atomic_update_byte(dst, [&](uint8_t cur) { return static_cast<uint8_t>(cur + a * v); });
}
__device__ void atomic_add(bool* dst, int64_t a, bool v) {
  atomic_update_byte(reinterpret_cast<uint8_t*>(dst), [&](uint8_t cur) {
    return static_cast<uint8_t>(cur + a * static_cast<int64_t>(v) != 0);
  });
}

// The type the CPU kernel adds in: float for the floats below double, int64 for the integers.
template <class T>
using AddType = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<is_floating_point(dtype_of<T>), float, int64_t>>;

// Operands over index's shape: self (stride 0 along dim), index, src.
template <class T>
__global__ void scatter_add_kernel(T* self, const int64_t* index, const T* src, OffsetCalc<3> oc,
                                   int64_t step, AddType<T> alpha, int64_t n, IndexCheck check) {
  EMBER_GRID_STRIDE(i, n) {
    int64_t off[3];
    oc.get(i, off);
    const int64_t k = index[off[1]];
    if (check.ok(k)) atomic_add(self + off[0] + k * step, alpha, src[off[2]]);
  }
}

// index_add_ of whole rows of floats (an embedding's weight gradient): a thread per 4 floats, one
// 16-byte atomic each on Hopper, where the element-wise kernel's offset arithmetic and 4-byte
// atomics took 4x the instructions. index_stride steps through the index along dim 0.
__global__ void index_add_rows_kernel(float* self, const int64_t* index, int64_t index_stride,
                                      const float* src, int64_t row_vecs, float alpha, int64_t n,
                                      IndexCheck check) {
  EMBER_GRID_STRIDE(i, n) {
    const int64_t r = i / row_vecs, c = i - r * row_vecs;
    const int64_t k = index[r * index_stride];
    if (!check.ok(k)) continue;
    const float4 v = reinterpret_cast<const float4*>(src)[i];
    float4* dst = reinterpret_cast<float4*>(self) + k * row_vecs + c;
#if __CUDA_ARCH__ >= 900
    atomicAdd(dst, make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w));
#else
    atomicAdd(&dst->x, alpha * v.x);
    atomicAdd(&dst->y, alpha * v.y);
    atomicAdd(&dst->z, alpha * v.z);
    atomicAdd(&dst->w, alpha * v.w);
#endif
  }
}

// Whether scatter_add is index_add_ along dim 0 of contiguous float rows that split into aligned
// 16-byte vectors (the index is broadcast along each row).
bool adds_float_rows(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  return self.dtype() == kFloat32 && dim == 0 && self.dim() == 2 && index.stride(1) == 0 &&
         self.size(1) > 0 && self.size(1) % 4 == 0 && index.size(1) == self.size(1) &&
         src.size(1) == self.size(1) && self.is_contiguous() && src.is_contiguous() && aligned(self) &&
         aligned(src);
}

// Lines along dim no longer than this are written by one thread each, in index order.
constexpr int64_t kSerialLine = 32;

// scatter's write: the element's bits.
struct AssignElement {
  template <class U>
  __device__ void operator()(U& dst, U v) const {
    dst = v;
  }
};

// scatter_add's in index order (deterministic mode): dst += alpha * v with the CPU kernel's
// arithmetic, so that the sums match the CPU's bit for bit.
template <class T>
struct AddElement {
  AddType<T> alpha;
  __device__ void operator()(T& dst, T v) const { dst = from_acc<T>(to_acc(dst) + alpha * to_acc(v)); }
};

// One thread per line along dim (oc over index's shape with dim of size 1: self's line start,
// index, src), writing in index order. Lines never share a destination, so nothing races.
template <class U, class Write>
__global__ void scatter_lines_kernel(U* self, const int64_t* index, const U* src, OffsetCalc<3> oc,
                                     int64_t len, int64_t self_step, int64_t index_step, int64_t src_step,
                                     int64_t lines, IndexCheck check, Write write) {
  EMBER_GRID_STRIDE(j, lines) {
    int64_t off[3];
    oc.get(j, off);
    for (int64_t i = 0; i < len; ++i) {
      const int64_t k = index[off[1] + i * index_step];
      if (check.ok(k)) write(self[off[0] + k * self_step], src[off[2] + i * src_step]);
    }
  }
}

// Launches scatter_lines_kernel over the lines of index along dim, elements as U.
template <class U, class Write>
void scatter_lines(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   cudaStream_t stream, IndexCheck check, Write write) {
  const int64_t len = index.size(dim), n = index.numel();
  if (n == 0) return;
  DimVector line_sizes(index.sizes());
  line_sizes[dim] = 1;
  const OffsetCalc<3> oc = make_offset_calc<3>("scatter", line_sizes,
                                               {strides_without(self, dim), index.strides(), src.strides()});
  const int64_t lines = n / len;
  scatter_lines_kernel<U><<<grid_for(lines, kThreads), kThreads, 0, stream>>>(
      static_cast<U*>(self.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
      static_cast<const U*>(src.data_ptr()), oc, len, self.stride(dim), index.stride(dim), src.stride(dim),
      lines, check, write);
  EMBER_CUDA_LAUNCH_CHECK();
}

// Operands over index's shape: self, index, src as above, then the logical (contiguous) position
// in self of the line's first element, and the position along dim.
using ScatterCalc = OffsetCalc<5>;

__global__ void scatter_winner_kernel(int* winner, const int64_t* index, ScatterCalc oc, int64_t logical_step,
                                      int64_t n, IndexCheck check) {
  EMBER_GRID_STRIDE(i, n) {
    int64_t off[5];
    oc.get(i, off);
    const int64_t k = index[off[1]];
    if (check.ok(k)) atomicMax(winner + off[3] + k * logical_step, static_cast<int>(off[4]));
  }
}

template <class U>
__global__ void scatter_assign_kernel(U* self, const int64_t* index, const U* src, const int* winner,
                                      ScatterCalc oc, int64_t step, int64_t logical_step, int64_t n,
                                      IndexCheck check) {
  EMBER_GRID_STRIDE(i, n) {
    int64_t off[5];
    oc.get(i, off);
    const int64_t k = index[off[1]];
    if (check.ok(k) && winner[off[3] + k * logical_step] == off[4]) self[off[0] + k * step] = src[off[2]];
  }
}

// Short lines (or a self so much larger than index that a slot per element of self would cost
// more than the writes) go a thread per line; otherwise two passes over every element, the first
// recording the winner of each destination in a slot per element of self.
void scatter_assign(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    cudaStream_t stream, IndexCheck check) {
  const int64_t nd = self.dim(), len = index.size(dim), n = index.numel();
  const DimVector self_strides = strides_without(self, dim);
  const auto* pi = static_cast<const int64_t*>(index.data_ptr());
  if (len <= kSerialLine || self.numel() > 8 * n) {
    visit_element_size(self.element_size(), [&](auto tag) {
      scatter_lines<decltype(tag)>(self, dim, index, src, stream, check, AssignElement{});
    });
    return;
  }
  EMBER_CHECK(len <= INT_MAX, "scatter: CUDA kernel supports at most ", INT_MAX,
              " indices along dim, got index ", index.sizes());
  // Contiguous strides over self's shape give each destination a slot in `winner`; along dim the
  // line's start has 0 and the position along dim is k.
  DimVector logical(nd, 0), coord(nd, 0);
  for (int64_t d = nd - 1, s = 1; d >= 0; --d) {
    logical[d] = s;
    s *= self.size(d);
  }
  const int64_t logical_step = logical[dim];
  logical[dim] = 0;
  coord[dim] = 1;
  const ScatterCalc oc = make_offset_calc<5>("scatter", index.sizes(),
                                             {self_strides, index.strides(), src.strides(), logical, coord});
  Tensor winner = empty({self.numel()}, TensorOptions(kInt32).device(self.device()));
  auto* pw = static_cast<int*>(winner.data_ptr());
  EMBER_CUDA_CHECK(cudaMemsetAsync(pw, 0xff, winner.nbytes(), stream));  // -1
  scatter_winner_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(pw, pi, oc, logical_step, n, check);
  EMBER_CUDA_LAUNCH_CHECK();
  visit_element_size(self.element_size(), [&](auto tag) {
    using U = decltype(tag);
    scatter_assign_kernel<U><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<U*>(self.data_ptr()), pi, static_cast<const U*>(src.data_ptr()), pw, oc, self.stride(dim),
        logical_step, n, check);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void scatter_cuda(const char* op, ScatterOp sop, const Tensor& self, int64_t dim, const Tensor& index,
                  const Tensor& src, const Scalar& alpha) {
  cudaStream_t stream = current_stream();
  const IndexCheck check = index_check(op, dim, self.size(dim));
  if (sop == ScatterOp::Assign) return scatter_assign(self, dim, index, src, stream, check);
  // Atomic float adds land in any order; in deterministic mode each line adds in index order
  // (integer adds give the same bits in any order).
  if (is_floating_point(self.dtype()) && are_deterministic_algorithms_enabled()) {
    visit_dtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_floating_point(dtype_of<T>))
        scatter_lines<T>(self, dim, index, src, stream, check, AddElement<T>{alpha.to<AddType<T>>()});
    });
    return;
  }
  if (adds_float_rows(self, dim, index, src)) {
    const int64_t row_vecs = self.size(1) / 4, n = index.size(0) * row_vecs;
    index_add_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<float*>(self.data_ptr()), static_cast<const int64_t*>(index.data_ptr()), index.stride(0),
        static_cast<const float*>(src.data_ptr()), row_vecs, alpha.to<float>(), n, check);
    EMBER_CUDA_LAUNCH_CHECK();
    return;
  }
  const DimVector self_strides = strides_without(self, dim);
  const OffsetCalc<3> oc =
      make_offset_calc<3>("scatter_add", index.sizes(), {self_strides, index.strides(), src.strides()});
  const int64_t n = index.numel();
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(self.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
        static_cast<const T*>(src.data_ptr()), oc, self.stride(dim), alpha.to<AddType<T>>(), n, check);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// --- index_range ---

struct MinOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

__global__ void index_range_kernel(long long* result, const int64_t* p, int64_t n) {
  __shared__ long long shared[kWarpSize];
  long long lo = LLONG_MAX, hi = LLONG_MIN;
  EMBER_GRID_STRIDE(i, n) {
    const long long v = p[i];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  lo = block_reduce(lo, MinOp{}, LLONG_MAX, shared);
  hi = block_reduce(hi, MaxOp{}, LLONG_MIN, shared);
  if (threadIdx.x == 0) {
    atomicMin(result, lo);
    atomicMax(result + 1, hi);
  }
}

IndexRange index_range_cuda(const char* op, const Tensor& index) {
  const Tensor c = index.contiguous();
  const int64_t n = c.numel();
  Tensor result = full({2}, LLONG_MAX, TensorOptions(kInt64).device(c.device()));
  result.narrow(0, 1, 1).fill_(LLONG_MIN);
  auto* pr = static_cast<long long*>(result.data_ptr());
  cudaStream_t stream = current_stream();
  index_range_kernel<<<grid_for(n, 4 * kThreads, kTargetBlocks), kThreads, 0, stream>>>(
      pr, static_cast<const int64_t*>(c.data_ptr()), n);
  EMBER_CUDA_LAUNCH_CHECK();
  long long host[2];
  detail::note_sync(op);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(host, pr, sizeof(host), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  raise_device_errors();
  return {host[0], host[1]};
}

// --- embedding: rows of U-sized words (U as wide as the row size, row stride and both pointers
// allow). ---

template <class U>
__global__ void embedding_kernel(U* out, const U* weight, const void* indices, bool int32_indices,
                                 int64_t row_words, int64_t row_stride, int64_t n, IndexCheck check) {
  const bool narrow = n <= static_cast<int64_t>(UINT32_MAX);
  EMBER_GRID_STRIDE(e, n) {
    const int64_t i = narrow ? static_cast<uint32_t>(e) / static_cast<uint32_t>(row_words) : e / row_words;
    const int64_t k =
        int32_indices ? static_cast<const int32_t*>(indices)[i] : static_cast<const int64_t*>(indices)[i];
    out[e] = check.ok(k) ? weight[k * row_stride + (e - i * row_words)] : U{};
  }
}

void embedding_cuda(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const IndexCheck check = index_check("embedding", 0, weight.size(0), DeviceIndexError::EmbeddingRow);
  const auto es = static_cast<int64_t>(weight.element_size());
  const int64_t row_bytes = weight.size(1) * es, stride_bytes = weight.stride(0) * es;
  if (row_bytes == 0) return;
  const auto po = reinterpret_cast<uintptr_t>(out.data_ptr()),
             pw = reinterpret_cast<uintptr_t>(weight.data_ptr());
  int64_t word = 16;
  while (word > 1 && (row_bytes % word || stride_bytes % word || po % word || pw % word)) word /= 2;
  cudaStream_t stream = current_stream();
  auto launch = [&](auto tag) {
    using U = decltype(tag);
    const int64_t row_words = row_bytes / word, n = indices.numel() * row_words;
    embedding_kernel<U><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<U*>(out.data_ptr()), static_cast<const U*>(weight.data_ptr()), indices.data_ptr(),
        indices.dtype() == kInt32, row_words, stride_bytes / word, n, check);
    EMBER_CUDA_LAUNCH_CHECK();
  };
  if (word == 16)
    launch(uint4{});
  else
    visit_element_size(static_cast<size_t>(word), launch);
}

KernelRegistrar<GatherFn> reg_gather(gather_stub, kCUDA, &gather_cuda);
KernelRegistrar<ScatterFn> reg_scatter(scatter_stub, kCUDA, &scatter_cuda);
KernelRegistrar<IndexRangeFn> reg_index_range(index_range_stub, kCUDA, &index_range_cuda);
KernelRegistrar<EmbeddingFn> reg_embedding(embedding_stub, kCUDA, &embedding_cuda);

}  // namespace
}  // namespace ember::cuda
