// CUDA kernels of 2D pooling: a thread per output element walks its window, with the CPU
// kernel's rules (NaN wins a max window, the last NaN's index; the divisor of avg_pool2d;
// adaptive windows [floor(i*s/n), ceil((i+1)*s/n))). f16/bf16 reduce in float. Tensors are
// row-major [P, H, W, V] as on the CPU: contiguous NCHW is P = N * C planes of V = 1 channel,
// channels-last NHWC is P = N planes of V = C channels, where neighbouring threads take
// neighbouring channels (coalesced loads and stores).
#include "ember/core/ops/pooling.h"
#include "ember/cuda/nn_kernel_util.cuh"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

// Output element e of [P, Ho, Wo, V] as (plane, oh, ow, c). V == 1 (NCHW) skips a division.
struct Cell {
  int64_t plane, oh, ow, c;
  __device__ Cell(int64_t e, int64_t ho, int64_t wo, int64_t v) : c(v == 1 ? 0 : e % v) {
    if (v != 1) e /= v;
    plane = e / (ho * wo), oh = e / wo % ho, ow = e % wo;
  }
  // The first element of this cell's input plane and channel; (ih, iw) is at [(ih * w + iw) * v].
  template <class T>
  __device__ const T* input(const T* in, int64_t h, int64_t w, int64_t v) const {
    return in + plane * h * w * v + c;
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

template <class T>
__global__ void max_pool_kernel(T* out, int64_t* indices, const T* in, int64_t h, int64_t w, int64_t ho,
                                int64_t wo, int64_t v, Pool2dParams p, int64_t total) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Cell cell(e, ho, wo, v);
    const T* x = cell.input(in, h, w, v);
    A best = lowest<A>();
    int64_t arg = -1;
    for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
      const int64_t ih = cell.oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
      if (ih < 0 || ih >= h) continue;
      for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
        const int64_t iw = cell.ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
        if (iw < 0 || iw >= w) continue;
        const A val = to_acc(x[(ih * w + iw) * v]);
        if (arg < 0 || val > best || is_nan(val)) best = val, arg = ih * w + iw;  // NaN wins, as in PyTorch
      }
    }
    out[e] = from_acc<T>(best);
    if (indices) indices[e] = arg;
  }
}

template <class T>
__global__ void avg_pool_kernel(T* out, const T* in, int64_t h, int64_t w, int64_t ho, int64_t wo, int64_t v,
                                Pool2dParams p, int64_t total) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Cell cell(e, ho, wo, v);
    const T* x = cell.input(in, h, w, v);
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
    const T* x = cell.input(in, h, w, v);
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

void max_pool_cuda(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  const int64_t total = out.numel();
  cudaStream_t stream = current_stream();
  visit_max_pool_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(out.data_ptr()),
        indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr,
        static_cast<const T*>(input.data_ptr()), input.size(2), input.size(3), out.size(2), out.size(3),
        channels(out, p.memory_format), p, total);
    EMBER_CUDA_LAUNCH_CHECK();
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
KernelRegistrar<AvgPool2dFn> reg_avg(avg_pool2d_stub, kCUDA, &avg_pool_cuda);
KernelRegistrar<AdaptiveAvgPool2dFn> reg_adaptive(adaptive_avg_pool2d_stub, kCUDA, &adaptive_avg_pool_cuda);

}  // namespace
}  // namespace ember::cuda
