// CUDA kernels of the shape ops: remap (flip, roll, pad, repeat) and tril/triu, one thread per
// output element. Both only move elements, so they are instantiated per element size.
#include <cstring>

#include "ember/core/ops/shape_ops.h"
#include "ember/cuda/elementwise.cuh"

namespace ember::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kMaxRemapDims = 16;

// i / d and i % d, by the multiply-shift divider when the index space fits in 31 bits.
template <bool kSmall>
struct Divider {
  int64_t d = 1;
  IntDivider fast;
  Divider() = default;
  explicit Divider(int64_t v) : d(v), fast(kSmall ? static_cast<uint32_t>(v) : 1u) {}
  __device__ __forceinline__ int64_t div(int64_t i) const {
    if constexpr (kSmall)
      return fast.div(static_cast<uint32_t>(i));
    else
      return i / d;
  }
};

template <bool kSmall>
struct RemapArgs {
  int ndim = 0;
  Divider<kSmall> sizes[kMaxRemapDims];
  int64_t table_start[kMaxRemapDims] = {};  // where each dim's table begins in `offsets`
};

template <class U, bool kSmall>
__global__ void remap_kernel(U* out, const U* in, const int64_t* offsets, int64_t n, RemapArgs<kSmall> a,
                             U fill) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rest = i, off = 0;
    bool is_fill = false;
    for (int d = a.ndim - 1; d >= 0; --d) {
      const int64_t q = a.sizes[d].div(rest);
      const int64_t t = offsets[a.table_start[d] + rest - q * a.sizes[d].d];
      is_fill = is_fill || t == kRemapFill;
      off += t;
      rest = q;
    }
    out[i] = is_fill ? fill : in[off];
  }
}

void remap(const Tensor& out, const Tensor& in, const Tensor& offsets, const Scalar& fill) {
  const int64_t nd = out.dim(), n = out.numel();
  EMBER_CHECK(nd <= kMaxRemapDims, "remap: the CUDA kernel takes at most ", kMaxRemapDims,
              " dims, got shape ", out.sizes());
  if (n == 0) return;
  uint64_t fill_bits = 0;
  visit_dtype(out.dtype(), [&](auto tag) {
    auto v = fill.to<decltype(tag)>();
    std::memcpy(&fill_bits, &v, sizeof(v));
  });
  Tensor table = offsets.contiguous();
  auto launch = [&](auto small) {
    constexpr bool kSmall = decltype(small)::value;
    RemapArgs<kSmall> a;
    a.ndim = static_cast<int>(nd);
    for (int64_t d = 0, start = 0; d < nd; start += out.size(d), ++d) {
      a.sizes[d] = Divider<kSmall>(out.size(d));
      a.table_start[d] = start;
    }
    visit_element_size(out.element_size(), [&](auto tag) {
      using U = decltype(tag);
      remap_kernel<U, kSmall><<<grid_for(n, kBlock), kBlock, 0, current_stream()>>>(
          static_cast<U*>(out.data_ptr()), static_cast<const U*>(in.data_ptr()), table.data_ptr<int64_t>(), n,
          a, static_cast<U>(fill_bits));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  };
  if (n <= INT32_MAX)
    launch(std::true_type{});
  else
    launch(std::false_type{});
}

// Batched matrices [..., R, C]: element (b, r, c) keeps in's value when c is on the kept side of
// the diagonal, else 0. The batch dims are coalesced to at most kMaxDims.
struct TriArgs {
  int64_t rows, cols, row_stride, col_stride, diagonal;
  bool upper;
  int nbatch;
  int64_t batch_sizes[kMaxDims], batch_strides[kMaxDims];  // innermost first
};

template <class U>
__global__ void tri_kernel(U* out, const U* in, int64_t n, TriArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t c = i % a.cols, row = i / a.cols, r = row % a.rows;
    int64_t edge = r + a.diagonal + (a.upper ? 0 : 1);
    edge = edge < 0 ? 0 : (edge > a.cols ? a.cols : edge);
    if (a.upper ? c < edge : c >= edge) {
      out[i] = U{};
      continue;
    }
    int64_t off = r * a.row_stride + c * a.col_stride;
    for (int64_t d = 0, b = row / a.rows; d < a.nbatch; ++d) {
      off += b % a.batch_sizes[d] * a.batch_strides[d];
      b /= a.batch_sizes[d];
    }
    out[i] = in[off];
  }
}

void tri(const Tensor& out, const Tensor& in_arg, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  // Coalesce the batch dims (outermost first), falling back to a contiguous copy past kMaxDims.
  auto batch_dims = [](const Tensor& t) {
    std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride)
    for (int64_t d = 0; d < t.dim() - 2; ++d) {
      if (t.size(d) == 1) continue;
      if (!dims.empty() && dims.back().second == t.stride(d) * t.size(d))
        dims.back() = {dims.back().first * t.size(d), t.stride(d)};
      else
        dims.push_back({t.size(d), t.stride(d)});
    }
    return dims;
  };
  Tensor in = in_arg;
  auto dims = batch_dims(in);
  if (dims.size() > static_cast<size_t>(kMaxDims)) {
    in = in.contiguous();
    dims = batch_dims(in);
  }
  TriArgs a{
      in.size(-2), in.size(-1), in.stride(-2), in.stride(-1), diagonal, upper, static_cast<int>(dims.size()),
      {},          {}};
  for (size_t k = 0; k < dims.size(); ++k) {
    a.batch_sizes[k] = dims[dims.size() - 1 - k].first;
    a.batch_strides[k] = dims[dims.size() - 1 - k].second;
  }
  visit_element_size(out.element_size(), [&](auto tag) {
    using U = decltype(tag);
    tri_kernel<U><<<grid_for(n, kBlock), kBlock, 0, current_stream()>>>(
        static_cast<U*>(out.data_ptr()), static_cast<const U*>(in.data_ptr()), n, a);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

KernelRegistrar<RemapFn> reg_remap(remap_stub, kCUDA, &remap);
KernelRegistrar<TriFn> reg_tri(tri_stub, kCUDA, &tri);

}  // namespace
}  // namespace ember::cuda
