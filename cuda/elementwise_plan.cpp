#include "ember/cuda/elementwise_plan.h"

#include <algorithm>
#include <atomic>
#include <climits>

#include "ember/cuda/check.h"

namespace ember::cuda {
namespace {

// The byte range [lo, hi) that t's elements span.
std::pair<uintptr_t, uintptr_t> byte_range(const Tensor& t) {
  auto lo = reinterpret_cast<uintptr_t>(t.data_ptr()), hi = lo;
  const auto es = static_cast<int64_t>(t.element_size());
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t span = (t.size(d) - 1) * t.stride(d) * es;
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  return {lo, hi + static_cast<uintptr_t>(es)};
}

}  // namespace

bool partially_overlaps(const Tensor& out, const Tensor& in) {
  if (out.numel() == 0 || in.numel() == 0 || out.impl().storage().get() != in.impl().storage().get())
    return false;
  auto [olo, ohi] = byte_range(out);
  auto [ilo, ihi] = byte_range(in);
  if (ohi <= ilo || ihi <= olo) return false;
  // The same elements in the same order is an in-place op: each is read before it is written.
  if (in.data_ptr() != out.data_ptr() || in.dtype() != out.dtype() || in.dim() > out.dim()) return true;
  const int64_t off = out.dim() - in.dim();
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (out.size(d) == 1) continue;
    int64_t s = d < off || in.size(d - off) == 1 ? 0 : in.stride(d - off);
    if (s != out.stride(d)) return true;
  }
  return false;
}

ElementwisePlan::ElementwisePlan(std::initializer_list<Tensor> operands) {
  n_ = static_cast<int>(operands.size());
  EMBER_CHECK(n_ >= 1 && n_ <= kMaxOperands, "elementwise: ", n_, " operands, at most ", kMaxOperands);
  const Tensor& out = *operands.begin();
  EMBER_CHECK(out.is_cuda(), "elementwise: CUDA kernel got an output on ", out.device());
  numel_ = out.numel();
  const int64_t nd = out.dim();
  LoopDims dims;
  for (int64_t d = 0; d < nd; ++d)
    if (out.size(d) != 1) dims.push_back({out.size(d), {}});
  int k = 0;
  for (Tensor t : operands) {
    dtypes_[k] = t.dtype();
    if (k > 0 && t.is_cpu()) {
      EMBER_CHECK(t.dim() == 0, "expected all tensors to be on the same device, but found ", out.device(),
                  " and a CPU tensor of shape ", t.sizes(), " (only 0-dim CPU tensors mix with CUDA ones)");
      scalar_[k] = ScalarKind::Host;
      host_value_[k] = t.item();
      ++k;
      continue;
    }
    EMBER_CHECK(t.device().type == kCUDA, "expected all tensors to be on the same device, but found ",
                out.device(), " and ", t.device());
    if (k > 0 && partially_overlaps(out, t)) {
      t = t.detach().clone();
      temporaries_.push_back(t);
    }
    data_[k] = static_cast<char*>(t.data_ptr());
    if (k > 0 && t.numel() == 1) {
      scalar_[k] = ScalarKind::Device;
    } else {
      // Broadcast: right-aligned, stride 0 for missing and size-1 dims.
      const int64_t off = nd - t.dim(), es = static_cast<int64_t>(t.element_size());
      size_t j = 0;
      for (int64_t d = 0; d < nd; ++d) {
        if (out.size(d) == 1) continue;
        int64_t td = d - off;
        dims[j++].strides[k] = td < 0 || t.size(td) == 1 ? 0 : t.stride(td) * es;
      }
    }
    ++k;
  }
  // Outermost first by the output's strides (an in-place op on a transposed view, an NHWC
  // output, walk memory in order), neighbours that every operand walks as one dim merged.
  coalesce_dims(dims, n_);
  if (dims.empty()) {  // one element
    LoopDim one{1, {}};
    for (int j = 0; j < n_; ++j)
      one.strides[j] = scalar_[j] == ScalarKind::None ? static_cast<int64_t>(element_size(dtypes_[j])) : 0;
    dims.push_back(one);
  }
  for (size_t d = dims.size(); d-- > 0;) {
    sizes_.push_back(dims[d].size);
    for (int j = 0; j < n_; ++j) strides_[j].push_back(dims[d].strides[j]);
  }
  contiguous_ = sizes_.size() == 1;
  for (int j = 0; j < n_; ++j)
    contiguous_ = contiguous_ && (scalar_[j] != ScalarKind::None ||
                                  strides_[j][0] == static_cast<int64_t>(element_size(dtypes_[j])));
}

void ElementwisePlan::for_each_chunk(const std::function<void(const LaunchChunk&)>& f) const {
  if (numel_ == 0) return;
  constexpr int64_t kMaxIndex = INT32_MAX;
  // Walks dims [0, nd) from `data`, the dims above nd already fixed.
  auto walk = [&](auto& self, int nd, std::array<char*, kMaxOperands> data) -> void {
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= sizes_[d];
    auto advance = [&](int64_t i) {
      std::array<char*, kMaxOperands> moved = data;
      for (int j = 0; j < n_; ++j)
        if (moved[j]) moved[j] += i * strides_[j][nd - 1];
      return moved;
    };
    const int64_t outer = sizes_[nd - 1], inner = n / outer;
    if (nd <= kMaxDims && inner <= kMaxIndex) {
      // Whole blocks of the outermost dim per launch.
      const int64_t rows = std::min(outer, kMaxIndex / inner);
      for (int64_t r = 0; r < outer; r += rows) {
        LaunchChunk c;
        c.ndim = nd;
        c.data = advance(r);
        for (int d = 0; d < nd; ++d) {
          c.sizes[d] = d == nd - 1 ? std::min(rows, outer - r) : sizes_[d];
          for (int j = 0; j < n_; ++j) c.strides[d][j] = strides_[j][d];
        }
        c.numel = inner * c.sizes[nd - 1];
        f(c);
      }
      return;
    }
    for (int64_t i = 0; i < outer; ++i) self(self, nd - 1, advance(i));
  };
  walk(walk, static_cast<int>(sizes_.size()), data_);
}

int multiprocessor_count() {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>& c = cached[dev % 64];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace ember::cuda
