// CUDA cumsum along a dim, accumulating in double (floats) or int64, as the CPU kernel. Two
// layouts, as the lines lie in memory:
//  - lines side by side (the scanned dim is not the fastest, e.g. cumsum over dim 0 of [N, C]),
//    or short lines: one thread per line walks it in order; neighbouring threads read neighbouring
//    addresses.
//  - long lines along the fastest dim: one block per line, a block-wide inclusive scan (warp
//    shuffles, then the warps' totals) over chunks of blockDim elements, carrying the running sum.
#include "ember/core/ops/scan.h"
#include "ember/cuda/elementwise.cuh"

namespace ember::cuda {
namespace {

constexpr int kBlock = 256;

// Where each line starts: the dims other than the scanned one, coalesced, innermost first.
struct Lines {
  int ndim;
  int64_t sizes[kMaxDims], in_strides[kMaxDims], out_strides[kMaxDims];
  int64_t count, len, in_step, out_step;  // lines, elements per line, strides along the line
  ScalarType in_dtype, out_dtype;
  int64_t in_es, out_es;
};

__device__ __forceinline__ void line_start(const Lines& l, int64_t line, int64_t& in_off, int64_t& out_off) {
  in_off = out_off = 0;
  for (int d = 0; d < l.ndim; ++d) {
    const int64_t q = line / l.sizes[d], i = line - q * l.sizes[d];
    in_off += i * l.in_strides[d];
    out_off += i * l.out_strides[d];
    line = q;
  }
}

template <class C>
__global__ void scan_lines_kernel(const char* in, char* out, Lines l) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < l.count;
       line += step) {
    int64_t in_off, out_off;
    line_start(l, line, in_off, out_off);
    C acc = 0;
    for (int64_t i = 0; i < l.len; ++i) {
      acc += load_as<C>(in + (in_off + i * l.in_step) * l.in_es, l.in_dtype);
      store_as(out + (out_off + i * l.out_step) * l.out_es, l.out_dtype, acc);
    }
  }
}

template <class C>
__global__ void __launch_bounds__(kBlock) scan_block_kernel(const char* in, char* out, Lines l) {
  __shared__ C warp_sums[kBlock / kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  for (int64_t line = blockIdx.x; line < l.count; line += gridDim.x) {
    int64_t in_off, out_off;
    line_start(l, line, in_off, out_off);
    C carry = 0;
    for (int64_t base = 0; base < l.len; base += kBlock) {
      const int64_t i = base + threadIdx.x;
      C v = i < l.len ? load_as<C>(in + (in_off + i * l.in_step) * l.in_es, l.in_dtype) : C(0);
#pragma unroll
      for (int off = 1; off < kWarpSize; off *= 2) {
        const C up = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += up;
      }
      if (lane == kWarpSize - 1) warp_sums[warp] = v;
      __syncthreads();
      C before = carry, total = carry;  // the sums of the earlier warps and of the whole chunk
#pragma unroll
      for (int w = 0; w < kBlock / kWarpSize; ++w) {
        if (w < warp) before += warp_sums[w];
        total += warp_sums[w];
      }
      if (i < l.len) store_as(out + (out_off + i * l.out_step) * l.out_es, l.out_dtype, before + v);
      carry = total;
      __syncthreads();  // warp_sums is rewritten by the next chunk
    }
  }
}

void cumsum(const Tensor& out, const Tensor& in_arg, int64_t dim) {
  if (out.numel() == 0) return;
  Tensor in = in_arg;
  auto lines_of = [&](const Tensor& t) {
    Lines l{};
    std::vector<std::array<int64_t, 3>> dims;  // (size, in stride, out stride), outermost first
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == dim || t.size(d) == 1) continue;
      if (!dims.empty() && dims.back()[1] == t.stride(d) * t.size(d) &&
          dims.back()[2] == out.stride(d) * t.size(d))
        dims.back() = {dims.back()[0] * t.size(d), t.stride(d), out.stride(d)};
      else
        dims.push_back({t.size(d), t.stride(d), out.stride(d)});
    }
    l.ndim = static_cast<int>(dims.size());
    for (int d = 0; d < l.ndim && d < kMaxDims; ++d) {
      const auto& e = dims[dims.size() - 1 - static_cast<size_t>(d)];
      l.sizes[d] = e[0];
      l.in_strides[d] = e[1];
      l.out_strides[d] = e[2];
    }
    l.len = t.size(dim);
    l.count = out.numel() / l.len;
    l.in_step = t.stride(dim);
    l.out_step = out.stride(dim);
    l.in_dtype = t.dtype();
    l.out_dtype = out.dtype();
    l.in_es = static_cast<int64_t>(t.element_size());
    l.out_es = static_cast<int64_t>(out.element_size());
    return l;
  };
  Lines l = lines_of(in);
  if (l.ndim > kMaxDims) {
    in = in.contiguous();
    l = lines_of(in);
  }
  // Lines side by side: the innermost line dim is closer in memory than the next element.
  const bool side_by_side = l.ndim > 0 && l.in_strides[0] < l.in_step;
  const bool per_thread = (side_by_side && l.count >= 4 * kBlock) || l.len <= 16;
  visit_compute_type(out.dtype(), [&](auto tag) {
    using C = std::conditional_t<std::is_floating_point_v<decltype(tag)>, double, int64_t>;
    const auto* src = static_cast<const char*>(in.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    if (per_thread)
      scan_lines_kernel<C><<<grid_for(l.count, kBlock), kBlock, 0, current_stream()>>>(src, dst, l);
    else
      scan_block_kernel<C><<<grid_for(l.count, 1), kBlock, 0, current_stream()>>>(src, dst, l);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<CumsumFn> reg_cumsum(cumsum_stub, kCUDA, &cumsum);

}  // namespace
}  // namespace ember::cuda
