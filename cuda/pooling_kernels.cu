// CUDA kernels of 2D pooling: a thread per output element walks its window, with the CPU
// kernel's rules (NaN wins a max window, the last NaN's index; the divisor of avg_pool2d;
// adaptive windows [floor(i*s/n), ceil((i+1)*s/n))). f16/bf16 reduce in float. Tensors are
// row-major [P, H, W, V] as on the CPU: contiguous NCHW is P = N * C planes of V = 1 channel,
// channels-last NHWC is P = N planes of V = C channels, where neighbouring threads take
// neighbouring channels (coalesced loads and stores). Max pooling and its backward take VEC
// channels per thread in 16-byte vectors where V allows, and 32-bit index arithmetic where the
// walk fits: ResNet's NHWC pool was bound by int64 divisions.
#include "ember/core/ops/pooling.h"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

// Vector e (of VEC channels) of [P, Ho, Wo, V] as (plane, oh, ow, c), c its first channel, in
// index type I. V == VEC (NCHW: 1) skips a division.
template <class I = int64_t, int VEC = 1>
struct Cell {
  I plane, oh, ow, c;
  __device__ Cell(I e, I ho, I wo, I v) {
    const I vecs = v / VEC;
    c = vecs == 1 ? 0 : e % vecs * VEC;
    if (vecs != 1) e /= vecs;
    plane = e / (ho * wo), oh = e / wo % ho, ow = e % wo;
  }
  // The first element of this cell's plane and channel in a [P, h, w, v] tensor; (ih, iw) is at
  // [(ih * w + iw) * v].
  template <class T>
  __device__ T* at(T* base, int64_t h, int64_t w, int64_t v) const {
    return base + static_cast<int64_t>(plane) * h * w * v + c;
  }
};

template <class A>
__device__ __forceinline__ A lowest() {
  return ::cuda::std::numeric_limits<A>::has_infinity ? -::cuda::std::numeric_limits<A>::infinity()
                                                      : ::cuda::std::numeric_limits<A>::lowest();
}

template <class A>
__device__ __forceinline__ bool is_nan(A v) {
  if constexpr (::cuda::std::is_floating_point_v<A>) return isnan(v);
  return false;
}

// Thread e: vector e of out's [P, Ho, Wo, V] (total vectors).
template <class I, class T, int VEC>
__global__ void max_pool_kernel(T* out, PoolIndices indices, const T* in, I h, I w, I ho, I wo, I v,
                                Pool2dParams p, I total) {
  using A = Acc<T>;
  using V = Vec<T, VEC>;
  for (I e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const Cell<I, VEC> cell(e, ho, wo, v);
    const T* x = cell.at(in, h, w, v);
    A best[VEC];
    I arg[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) best[j] = lowest<A>(), arg[j] = -1;
    for (I kh = 0; kh < p.kernel[0]; ++kh) {
      const I ih = cell.oh * static_cast<I>(p.stride[0]) - static_cast<I>(p.padding[0]) +
                   kh * static_cast<I>(p.dilation[0]);
      if (ih < 0 || ih >= h) continue;
      for (I kw = 0; kw < p.kernel[1]; ++kw) {
        const I iw = cell.ow * static_cast<I>(p.stride[1]) - static_cast<I>(p.padding[1]) +
                     kw * static_cast<I>(p.dilation[1]);
        if (iw < 0 || iw >= w) continue;
        const V xv = *reinterpret_cast<const V*>(x + static_cast<int64_t>(ih * w + iw) * v);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const A val = to_acc(xv.v[j]);
          // NaN wins, as in PyTorch.
          if (arg[j] < 0 || val > best[j] || is_nan(val)) best[j] = val, arg[j] = ih * w + iw;
        }
      }
    }
    V o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(best[j]);
    reinterpret_cast<V*>(out)[e] = o;
    if (indices.data)
#pragma unroll
      for (int j = 0; j < VEC; ++j) indices.set(static_cast<int64_t>(e) * VEC + j, arg[j]);
  }
}

// Thread e: vector e of grad_input's [P, H, W, V], the sum of the gradients of the windows
// (in order) whose maximum it is.
template <class I, class T, int VEC>
__global__ void max_pool_backward_kernel(T* grad_in, const T* grad_out, PoolIndices indices, I h, I w, I ho,
                                         I wo, I v, Pool2dParams p, I total) {
  using A = Acc<T>;
  using V = Vec<T, VEC>;
  for (I e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const Cell<I, VEC> cell(e, h, w, v);  // (plane, ih, iw, c)
    const int64_t plane_out = static_cast<int64_t>(cell.plane) * ho * wo * v + cell.c;
    const WindowRange rh =
        windows_containing(cell.oh, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], ho);
    const WindowRange rw =
        windows_containing(cell.ow, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], wo);
    const int64_t self = static_cast<int64_t>(cell.oh) * w + cell.ow;
    A sum[VEC] = {};
    for (int64_t oh = rh.begin; oh < rh.end; ++oh)
      for (int64_t ow = rw.begin; ow < rw.end; ++ow) {
        const int64_t o = plane_out + (oh * wo + ow) * v;
        const V g = *reinterpret_cast<const V*>(grad_out + o);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if (indices.get(o + j) == self) sum[j] += to_acc(g.v[j]);
      }
    V r;
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = from_acc<T>(sum[j]);
    reinterpret_cast<V*>(grad_in)[e] = r;
  }
}

template <class T>
__global__ void avg_pool_kernel(T* out, const T* in, int64_t h, int64_t w, int64_t ho, int64_t wo, int64_t v,
                                Pool2dParams p, int64_t total) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Cell cell(e, ho, wo, v);
    const T* x = cell.at(in, h, w, v);
    // The window, clipped first to the padded input (count_include_pad's size), then to it.
    int64_t h0 = cell.oh * p.stride[0] - p.padding[0], w0 = cell.ow * p.stride[1] - p.padding[1];
    int64_t h1 = min(h0 + p.kernel[0], h + p.padding[0]), w1 = min(w0 + p.kernel[1], w + p.padding[1]);
    const int64_t padded_size = (h1 - h0) * (w1 - w0);
    h0 = max(h0, int64_t{0}), w0 = max(w0, int64_t{0});
    h1 = min(h1, h), w1 = min(w1, w);
    A sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += to_acc(x[(ih * w + iw) * v]);
    const int64_t size = max(int64_t{0}, h1 - h0) * max(int64_t{0}, w1 - w0);
    const int64_t divisor = p.divisor ? p.divisor : p.count_include_pad ? padded_size : size;
    out[e] = from_acc<T>(size > 0 ? sum / static_cast<A>(divisor) : A(0));
  }
}

template <class T>
__global__ void adaptive_avg_pool_kernel(T* out, const T* in, int64_t h, int64_t w, int64_t ho, int64_t wo,
                                         int64_t v, int64_t total) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Cell cell(e, ho, wo, v);
    const T* x = cell.at(in, h, w, v);
    const int64_t h0 = cell.oh * h / ho, h1 = ((cell.oh + 1) * h + ho - 1) / ho;
    const int64_t w0 = cell.ow * w / wo, w1 = ((cell.ow + 1) * w + wo - 1) / wo;
    A sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += to_acc(x[(ih * w + iw) * v]);
    out[e] = from_acc<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
}

// Calls f(T{}) for the dtypes max_pool2d takes: all but bool.
template <class F>
void visit_max_pool_dtype(ScalarType t, F&& f) {
  switch (t) {
    case kUInt8:
      return f(uint8_t{});
    case kInt32:
      return f(int32_t{});
    case kInt64:
      return f(int64_t{});
    default:
      return visit_float_dtype("max_pool2d", t, f);
  }
}

// V of the [P, H, W, V] walk: C for channels-last, 1 for NCHW.
int64_t channels(const Tensor& out, MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast ? out.size(1) : 1;
}

// f(I{}, integral_constant<VEC>, total vectors) launches a kernel over `walk`'s [P, rows, cols,
// V] in vectors of VEC channels (16 bytes when V and the pointers allow), with I = int32_t when
// the walk fits in it.
template <class T, class F>
void launch_vectorized(const Tensor& walk, MemoryFormat format, std::initializer_list<const void*> ptrs,
                       const F& f) {
  const int64_t v = channels(walk, format);
  with_vector_width<T>(v, ptrs, [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    const int64_t total = walk.numel() / VEC;
    if (walk.numel() <= INT32_MAX / 2)  // room for the grid stride past the end
      f(int32_t{}, vec, total);
    else
      f(int64_t{}, vec, total);
  });
  EMBER_CUDA_LAUNCH_CHECK();
}

void max_pool_cuda(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  cudaStream_t stream = current_stream();
  visit_max_pool_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = static_cast<T*>(out.data_ptr());
    const T* pi = static_cast<const T*>(input.data_ptr());
    const PoolIndices pidx = PoolIndices::of(indices);
    launch_vectorized<T>(out, p.memory_format, {po, pi}, [&](auto index, auto vec, int64_t total) {
      using I = decltype(index);
      constexpr int VEC = decltype(vec)::value;
      max_pool_kernel<I, T, VEC><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
          po, pidx, pi, static_cast<I>(input.size(2)), static_cast<I>(input.size(3)),
          static_cast<I>(out.size(2)), static_cast<I>(out.size(3)),
          static_cast<I>(channels(out, p.memory_format)), p, static_cast<I>(total));
    });
  });
}

void max_pool_backward_cuda(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                            const Pool2dParams& p) {
  cudaStream_t stream = current_stream();
  visit_float_dtype("max_pool2d_backward", grad_in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pgi = static_cast<T*>(grad_in.data_ptr());
    const T* pgo = static_cast<const T*>(grad_out.data_ptr());
    launch_vectorized<T>(grad_in, p.memory_format, {pgi, pgo}, [&](auto index, auto vec, int64_t total) {
      using I = decltype(index);
      constexpr int VEC = decltype(vec)::value;
      max_pool_backward_kernel<I, T, VEC><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
          pgi, pgo, PoolIndices::of(indices), static_cast<I>(grad_in.size(2)),
          static_cast<I>(grad_in.size(3)), static_cast<I>(grad_out.size(2)), static_cast<I>(grad_out.size(3)),
          static_cast<I>(channels(grad_in, p.memory_format)), p, static_cast<I>(total));
    });
  });
}

void avg_pool_cuda(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  const int64_t total = out.numel();
  cudaStream_t stream = current_stream();
  visit_float_dtype("avg_pool2d", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_pool_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const T*>(input.data_ptr()), input.size(2),
        input.size(3), out.size(2), out.size(3), channels(out, p.memory_format), p, total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void adaptive_avg_pool_cuda(const Tensor& out, const Tensor& input, MemoryFormat format) {
  const int64_t total = out.numel();
  cudaStream_t stream = current_stream();
  visit_float_dtype("adaptive_avg_pool2d", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_pool_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const T*>(input.data_ptr()), input.size(2),
        input.size(3), out.size(2), out.size(3), channels(out, format), total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<MaxPool2dFn> reg_max(max_pool2d_stub, kCUDA, &max_pool_cuda);
KernelRegistrar<MaxPool2dBackwardFn> reg_max_backward(max_pool2d_backward_stub, kCUDA,
                                                      &max_pool_backward_cuda);
KernelRegistrar<AvgPool2dFn> reg_avg(avg_pool2d_stub, kCUDA, &avg_pool_cuda);
KernelRegistrar<AdaptiveAvgPool2dFn> reg_adaptive(adaptive_avg_pool2d_stub, kCUDA, &adaptive_avg_pool_cuda);

}  // namespace
}  // namespace ember::cuda
