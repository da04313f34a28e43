// CUDA sort along a dim (sort, argsort and topk: topk sorts the whole line and keeps the first
// k). Each line's elements become unsigned keys whose order is the sort's (NaN largest, -0 equal
// to +0; bits flipped for descending), CUB's stable segmented sort orders (key, position) pairs,
// and the values are then read back from the input at the sorted positions, so they keep their
// exact bits. Stability gives the CPU's tie order: equal elements keep their input order.
#include <cub/device/device_segmented_sort.cuh>

#include "ember/core/factories.h"
#include "ember/core/ops/sorting.h"
#include "ember/cuda/nn_kernel_util.cuh"
#include "ember/cuda/offset_calc.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t sort_key(float v) {
  if (isnan(v)) return 0xffc00000u;  // above +inf's key
  uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ uint64_t sort_key(double v) {
  if (isnan(v)) return 0xfff8000000000000ull;
  auto u = static_cast<uint64_t>(__double_as_longlong(v == 0.0 ? 0.0 : v));
  return u & 0x8000000000000000ull ? ~u : u | 0x8000000000000000ull;
}
__device__ __forceinline__ uint32_t sort_key(Half v) { return sort_key(to_acc(v)); }
__device__ __forceinline__ uint32_t sort_key(BFloat16 v) { return sort_key(to_acc(v)); }
__device__ __forceinline__ uint32_t sort_key(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
__device__ __forceinline__ uint64_t sort_key(int64_t v) {
  return static_cast<uint64_t>(v) ^ 0x8000000000000000ull;
}
__device__ __forceinline__ uint32_t sort_key(uint8_t v) { return v; }
__device__ __forceinline__ uint32_t sort_key(bool v) { return v; }

template <class T>
using KeyOf = decltype(sort_key(T{}));

// keys[e], positions[e] for element e of the [lines, n] layout; oc gives self's offset and the
// position along dim.
template <class T>
__global__ void sort_keys_kernel(KeyOf<T>* keys, int64_t* positions, const T* self, OffsetCalc<2> oc,
                                 bool descending, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[2];
    oc.get(e, off);
    const KeyOf<T> key = sort_key(self[off[0]]);
    keys[e] = descending ? static_cast<KeyOf<T>>(~key) : key;
    positions[e] = off[1];
  }
}

__global__ void segment_offsets_kernel(int64_t* offsets, int64_t lines, int64_t n) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l <= lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x)
    offsets[l] = l * n;
}

// The first k of each sorted line: oc over [lines, k] gives the offsets in values, indices, self
// (its line's first element) and the sorted layout.
template <class U>
__global__ void sort_write_kernel(U* values, int64_t* indices, const U* self, const int64_t* sorted,
                                  OffsetCalc<4> oc, int64_t self_step, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[4];
    oc.get(e, off);
    const int64_t i = sorted[off[3]];
    values[off[0]] = self[off[2] + i * self_step];
    indices[off[1]] = i;
  }
}

// `sizes` and `strides` with dim moved last (and its size there set to `len`).
DimVector dim_last(IntArrayRef v, int64_t dim, int64_t last) {
  DimVector r(v);
  r.erase(dim);
  r.push_back(last);
  return r;
}

// Stable ascending sort of `total` (key, position) pairs in `lines` segments of n.
template <class K>
void segmented_sort(const Tensor& keys, const Tensor& positions, Tensor& sorted, int64_t lines, int64_t n,
                    cudaStream_t stream) {
  const TensorOptions o = keys.options();
  const int64_t total = lines * n;
  Tensor keys_out = empty({total}, o), offsets = empty({lines + 1}, positions.options());
  sorted = empty({total}, positions.options());
  auto* po = static_cast<int64_t*>(offsets.data_ptr());
  segment_offsets_kernel<<<grid_for(lines + 1, kThreads), kThreads, 0, stream>>>(po, lines, n);
  EMBER_CUDA_LAUNCH_CHECK();
  const auto* ki = static_cast<const K*>(keys.data_ptr());
  auto* ko = static_cast<K*>(keys_out.data_ptr());
  const auto* vi = static_cast<const int64_t*>(positions.data_ptr());
  auto* vo = static_cast<int64_t*>(sorted.data_ptr());
  size_t bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, ki, ko, vi, vo, total, lines, po,
                                                             po + 1, stream));
  Tensor temp = empty({static_cast<int64_t>(bytes)}, TensorOptions(kUInt8).device(keys.device()));
  EMBER_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(temp.data_ptr(), bytes, ki, ko, vi, vo, total,
                                                             lines, po, po + 1, stream));
}

void sort_cuda(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim, int64_t k,
               bool descending, bool /*sorted: always*/) {
  const int64_t n = self.size(dim), lines = self.numel() / n, total = self.numel();
  cudaStream_t stream = current_stream();
  const DimVector shape = dim_last(self.sizes(), dim, n);
  // The [lines, n] layout: position along dim and contiguous strides.
  DimVector along(shape.size(), 0), layout(shape.size());
  along.back() = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1, s = 1; d >= 0; --d) {
    layout[d] = s;
    s *= shape[d];
  }
  const OffsetCalc<2> key_oc =
      make_offset_calc<2>("sort", shape, {dim_last(self.strides(), dim, self.stride(dim)), along});
  Tensor positions = empty({total}, TensorOptions(kInt64).device(self.device())), sorted;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using K = KeyOf<T>;
    Tensor keys = empty({total}, TensorOptions(sizeof(K) == 4 ? kInt32 : kInt64).device(self.device()));
    sort_keys_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<K*>(keys.data_ptr()), static_cast<int64_t*>(positions.data_ptr()),
        static_cast<const T*>(self.data_ptr()), key_oc, descending, total);
    EMBER_CUDA_LAUNCH_CHECK();
    segmented_sort<K>(keys, positions, sorted, lines, n, stream);
  });
  const DimVector out_shape = dim_last(self.sizes(), dim, k);
  DimVector line_start = dim_last(self.strides(), dim, 0);
  const OffsetCalc<4> write_oc =
      make_offset_calc<4>("sort", out_shape,
                          {dim_last(values.strides(), dim, values.stride(dim)),
                           dim_last(indices.strides(), dim, indices.stride(dim)), line_start, layout});
  const int64_t out_total = lines * k;
  visit_element_size(self.element_size(), [&](auto tag) {
    using U = decltype(tag);
    sort_write_kernel<U><<<grid_for(out_total, kThreads), kThreads, 0, stream>>>(
        static_cast<U*>(values.data_ptr()), static_cast<int64_t*>(indices.data_ptr()),
        static_cast<const U*>(self.data_ptr()), static_cast<const int64_t*>(sorted.data_ptr()), write_oc,
        self.stride(dim), out_total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<SortFn> reg_sort(sort_stub, kCUDA, &sort_cuda);

}  // namespace
}  // namespace ember::cuda
