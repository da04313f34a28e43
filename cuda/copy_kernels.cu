// CUDA copy_ and fill_. copy_ comes here whenever either side is on a GPU:
//  - on one device: a memcpy when both sides are dense in the same order, else the elementwise
//    launcher (raw element moves for one dtype, 16-byte vectorized casts between the floats of
//    mixed precision, converting strided loads for the rest);
//  - host <-> device: cudaMemcpyAsync on the current stream when both sides are dense with one
//    dtype and the same strides (contiguous, channels-last, any order of dims), waited for unless
//    non_blocking with a pinned host side; anything else is staged (a temporary of the
//    destination's dtype, and its layout when that is dense, on the source's device, the
//    transfer, then for a destination that is not dense a copy into it on its device);
//  - between GPUs: cudaMemcpyPeerAsync, staged the same way.
#include <cstring>

#include "ember/core/copy.h"
#include "ember/core/factories.h"
#include "ember/cuda/device_error.h"
#include "ember/cuda/elementwise.cuh"
#include "ember/cuda/host_allocator.h"
#include "ember/cuda/sync_debug.h"

namespace ember::cuda {
namespace {

template <class U>
struct Constant {
  U v;
  __host__ __device__ U operator()() const { return v; }
};

int current_device() {
  int d = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

int device_index(const Tensor& t) { return t.device().index >= 0 ? t.device().index : current_device(); }

// Makes `device` current for a scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : prev_(current_device()) {
    if (device != prev_) EMBER_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_;
};

bool is_pinned(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

// Both sides of one dtype, shape and dense layout (the same strides): a plain byte copy.
bool is_direct(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes().equals(src.sizes()) &&
         dst.strides().equals(src.strides()) && dst.is_non_overlapping_and_dense();
}

// A temporary on `device` that a copy to dst goes through: dst's dtype, and its strides when
// dst is dense (a channels-last tensor moves as its bytes), else contiguous.
Tensor staging_for(const Tensor& dst, Device device) {
  TensorOptions options = TensorOptions(dst.dtype()).device(device);
  return dst.is_non_overlapping_and_dense() ? empty_strided(dst.sizes(), dst.strides(), options)
                                            : empty(dst.sizes(), options);
}

// The vectorized casts: every pair of float32, float16 and bfloat16.
template <class D, class S>
bool try_vectorized_cast(const ElementwisePlan& plan) {
  if constexpr (std::is_same_v<D, S>) {
    return false;
  } else {
    if (!matches_vectorized<D, S>(plan, std::index_sequence<0>{})) return false;
    launch_vectorized<D, float, Identity, S>(plan, Identity{});
    return true;
  }
}

template <class D, class... S>
bool try_vectorized_cast_from(const ElementwisePlan& plan, TypeList<S...>) {
  return (try_vectorized_cast<D, S>(plan) || ...);
}

template <class... D>
bool try_vectorized_cast_to(const ElementwisePlan& plan, TypeList<D...> floats) {
  return (try_vectorized_cast_from<D>(plan, floats) || ...);
}

// dst = src on the current device (src broadcast to dst's shape).
void device_copy(const Tensor& dst, const Tensor& src) {
  if (dst.data_ptr() == src.data_ptr() && is_direct(dst, src)) return;
  ElementwisePlan plan({dst, src});
  if (dst.dtype() == src.dtype()) {
    if (plan.contiguous() && plan.scalar(1) == ScalarKind::None) {
      if (plan.data(0) == plan.data(1)) return;
      EMBER_CUDA_CHECK(cudaMemcpyAsync(plan.data(0), plan.data(1), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                       current_stream()));
      return;
    }
    visit_element_size(dst.element_size(),
                       [&](auto tag) { launch_strided<RawIO<decltype(tag)>, 1>(plan, Identity{}); });
    return;
  }
  if (try_vectorized_cast_to(plan, VectorizedStorages<float>::type{})) return;
  // Read as the source's compute type, which holds every source value exactly, so each value is
  // converted once, as the CPU's static_cast<D>(S).
  visit_compute_type(src.dtype(),
                     [&](auto tag) { launch_strided<CastIO<decltype(tag)>, 1>(plan, Identity{}); });
}

// dst = src where one side is on the CPU.
void host_device_copy(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (!is_direct(dst, src)) {
    Tensor staged = staging_for(dst, src.device());
    copy_stub(src.device())(staged, src, false);
    if (is_direct(dst, staged)) return host_device_copy(dst, staged, non_blocking);
    Tensor landed = empty(dst.sizes(), dst.options());
    host_device_copy(landed, staged, non_blocking);
    copy_stub(dst.device())(dst, landed, false);
    return;
  }
  const bool to_host = dst.is_cpu();
  cudaStream_t stream = current_stream();
  const void* host = to_host ? dst.data_ptr() : src.data_ptr();
  const bool waits = !non_blocking || !is_pinned(host);
  if (waits)
    detail::note_sync(to_host ? "copy_ to the host (item(), cpu(), to(kCPU))"
                              : "copy_ (from the host, blocking)");
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                   to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream));
  // A pinned block that a queued copy still reads or writes is reused only after the copy.
  if (waits) {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
    raise_device_errors();
  } else {
    host_record_event(host, current_stream());
  }
}

// dst = src on two different GPUs: src's device finishes its work, the peer copy runs on the
// destination's current stream.
void peer_copy(const Tensor& dst, int dst_dev, const Tensor& src, int src_dev, bool non_blocking) {
  if (!is_direct(dst, src)) {
    Tensor staged = staging_for(dst, Device(kCUDA, src_dev));
    {
      DeviceGuard g(src_dev);
      device_copy(staged, src);
    }
    if (is_direct(dst, staged)) return peer_copy(dst, dst_dev, staged, src_dev, non_blocking);
    Tensor landed = empty(dst.sizes(), dst.options());
    peer_copy(landed, dst_dev, staged, src_dev, non_blocking);
    DeviceGuard g(dst_dev);
    device_copy(dst, landed);
    return;
  }
  {
    DeviceGuard g(src_dev);
    detail::note_sync("copy_ (between GPUs)");
    EMBER_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  }
  DeviceGuard g(dst_dev);
  cudaStream_t stream = current_stream();
  EMBER_CUDA_CHECK(
      cudaMemcpyPeerAsync(dst.data_ptr(), dst_dev, src.data_ptr(), src_dev, dst.nbytes(), stream));
  if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_kernel(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.is_cpu() || src.is_cpu()) return host_device_copy(dst, src, non_blocking);
  const int dst_dev = device_index(dst), src_dev = device_index(src);
  if (dst_dev != src_dev) return peer_copy(dst, dst_dev, src, src_dev, non_blocking);
  DeviceGuard g(dst_dev);
  device_copy(dst, src);
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  uint64_t bits = 0;
  visit_dtype(dst.dtype(), [&](auto tag) {
    auto v = value.to<decltype(tag)>();
    std::memcpy(&bits, &v, sizeof(v));
  });
  ElementwisePlan plan({dst});
  const size_t es = dst.element_size();
  bool same_bytes = true;  // a byte pattern (zeros above all) is a memset
  for (size_t i = 1; i < es; ++i) same_bytes = same_bytes && (bits >> (8 * i) & 0xff) == (bits & 0xff);
  if (plan.contiguous() && same_bytes) {
    EMBER_CUDA_CHECK(
        cudaMemsetAsync(plan.data(0), static_cast<int>(bits & 0xff), dst.nbytes(), current_stream()));
    return;
  }
  visit_element_size(es, [&](auto tag) {
    using U = decltype(tag);
    Constant<U> f{static_cast<U>(bits)};
    if (plan.contiguous() && plan.aligned(0, 16))
      launch_vectorized<U, U, Constant<U>>(plan, f);
    else
      launch_strided<RawIO<U>, 0>(plan, f);
  });
}

KernelRegistrar<CopyFn> reg_copy(copy_stub, kCUDA, &copy_kernel);
KernelRegistrar<FillFn> reg_fill(fill_stub, kCUDA, &fill_kernel);

}  // namespace
}  // namespace ember::cuda
