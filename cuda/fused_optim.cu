// CUDA kernels of the fused optimizer steps, multi_tensor_apply style (as PyTorch's
// aten/src/ATen/native/cuda/MultiTensorApply.cuh): the tensors' addresses and sizes travel in the
// kernel arguments, in batches of at most TensorListMeta::kMaxTensors tensors and kMaxBlocks
// chunks of kChunkSize elements. Each block updates one chunk, with 16-byte loads and stores
// where all of the chunk's lists are aligned. The math is fused_optim_functors.h's.
#include <cstdint>
#include <vector>

#include "ember/core/ops/fused_optim.h"
#include "ember/core/ops/fused_optim_functors.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda {
namespace {

constexpr int kBlockSize = 512;
constexpr int64_t kChunkSize = 65536;
constexpr int kMaxBlocks = 320;

// Kernel arguments stay under the classic 4 KB limit: Adam (5 lists) fits 36 tensors, SGD 48.
template <int D>
struct TensorListMeta {
  static constexpr int kMaxTensors = D >= 5 ? 36 : 48;
  void* addresses[D][kMaxTensors];  // null for an absent list (max_exp_avg_sqs without amsgrad)
  int64_t numel[kMaxTensors];
  const float* steps[kMaxTensors];  // Adam's step counts
  unsigned char block_to_tensor[kMaxBlocks];
  int block_to_chunk[kMaxBlocks];
};
static_assert(sizeof(TensorListMeta<5>) + 128 <= 4096 && sizeof(TensorListMeta<3>) + 128 <= 4096);

template <class S, int N>
struct alignas(sizeof(S) * N) Pack {
  S v[N];
};

// List 0 is the params, list 1 the grads (stored back only when unscaled), then the state.
template <class S>
struct AdamOp {
  static constexpr int kDepth = 5;
  using T = ops::OptimMath<S>;
  FusedAdamArgs args;
  const float* grad_scale;
  const float* found_inf;

  struct PerTensor {
    ops::AdamUpdate<T> update;
    T scale;
  };
  __device__ PerTensor per_tensor(const float* step) const {
    return {ops::AdamUpdate<T>(args, *step), grad_scale ? static_cast<T>(*grad_scale) : T(1)};
  }
  __device__ void operator()(const PerTensor& c, S (&e)[kDepth]) const {
    T param = e[0], g = e[1], exp_avg = e[2], exp_avg_sq = e[3], max_exp_avg_sq = e[4];
    if (grad_scale) e[1] = static_cast<S>(g = g / c.scale);
    c.update(param, g, exp_avg, exp_avg_sq, max_exp_avg_sq);
    e[0] = static_cast<S>(param);
    e[2] = static_cast<S>(exp_avg);
    e[3] = static_cast<S>(exp_avg_sq);
    e[4] = static_cast<S>(max_exp_avg_sq);
  }
};

template <class S>
struct SgdOp {
  static constexpr int kDepth = 3;
  using T = ops::OptimMath<S>;
  FusedSgdArgs args;
  const float* grad_scale;
  const float* found_inf;

  struct PerTensor {
    ops::SgdUpdate<T> update;
    T scale;
  };
  __device__ PerTensor per_tensor(const float*) const {
    return {ops::SgdUpdate<T>(args), grad_scale ? static_cast<T>(*grad_scale) : T(1)};
  }
  __device__ void operator()(const PerTensor& c, S (&e)[kDepth]) const {
    T param = e[0], g = e[1], buf = e[2];
    if (grad_scale) e[1] = static_cast<S>(g = g / c.scale);
    c.update(param, g, buf);
    e[0] = static_cast<S>(param);
    e[2] = static_cast<S>(buf);
  }
};

// Updates elements [i, i + N) of one chunk: N per thread, loaded and stored as one Pack per list.
template <int N, class S, int D, class Op>
__device__ __forceinline__ void update_pack(S* const (&ptr)[D], int64_t i, const Op& op,
                                            const typename Op::PerTensor& c) {
  Pack<S, N> r[D];
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (ptr[d]) r[d] = *reinterpret_cast<const Pack<S, N>*>(ptr[d] + i);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    S e[D];
#pragma unroll
    for (int d = 0; d < D; ++d) e[d] = r[d].v[j];
    op(c, e);
#pragma unroll
    for (int d = 0; d < D; ++d) r[d].v[j] = e[d];
  }
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (ptr[d] && (d != 1 || op.grad_scale)) *reinterpret_cast<Pack<S, N>*>(ptr[d] + i) = r[d];
}

template <class S, class Op>
__global__ void __launch_bounds__(kBlockSize) multi_tensor_kernel(TensorListMeta<Op::kDepth> meta, Op op) {
  constexpr int D = Op::kDepth;
  if (op.found_inf && *op.found_inf != 0) return;
  const int t = meta.block_to_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_to_chunk[blockIdx.x]) * kChunkSize;
  const int64_t n = min(kChunkSize, meta.numel[t] - start);
  S* ptr[D];
  bool aligned = true;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    ptr[d] = meta.addresses[d][t] ? static_cast<S*>(meta.addresses[d][t]) + start : nullptr;
    aligned = aligned && reinterpret_cast<uintptr_t>(ptr[d]) % 16 == 0;
  }
  const typename Op::PerTensor c = op.per_tensor(meta.steps[t]);
  constexpr int kVec = 16 / sizeof(S);
  if (aligned && n % kVec == 0) {
    for (int64_t i = threadIdx.x * kVec; i < n; i += blockDim.x * kVec) update_pack<kVec>(ptr, i, op, c);
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) update_pack<1>(ptr, i, op, c);
  }
}

// Launches Op over the lists (lists[0]: the params; an empty list passes null addresses).
template <class S, class Op>
void multi_tensor_apply(const std::vector<ArrayRef<Tensor>>& lists, ArrayRef<Tensor> steps, const Op& op,
                        cudaStream_t stream) {
  constexpr int D = Op::kDepth;
  using Meta = TensorListMeta<D>;
  Meta meta{};
  ArrayRef<Tensor> params = lists[0];
  auto set_slot = [&](int slot, size_t t) {
    for (int d = 0; d < D; ++d) meta.addresses[d][slot] = lists[d].empty() ? nullptr : lists[d][t].data_ptr();
    meta.numel[slot] = params[t].numel();
    meta.steps[slot] = steps.empty() ? nullptr : steps[t].data_ptr<float>();
  };
  auto launch = [&](int blocks) {
    multi_tensor_kernel<S, Op><<<blocks, kBlockSize, 0, stream>>>(meta, op);
    EMBER_CUDA_LAUNCH_CHECK();
  };
  int slot = 0, blocks = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    const int64_t chunks = ceil_div(params[t].numel(), kChunkSize);
    if (chunks == 0) continue;
    set_slot(slot, t);
    for (int64_t c = 0; c < chunks; ++c) {
      meta.block_to_tensor[blocks] = static_cast<unsigned char>(slot);
      meta.block_to_chunk[blocks] = static_cast<int>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks == kMaxBlocks || (last_chunk && slot + 1 == Meta::kMaxTensors)) {
        launch(blocks);
        blocks = 0;
        // A tensor with chunks left continues as slot 0 of the next batch.
        if (!last_chunk) set_slot(0, t);
        slot = last_chunk ? -1 : 0;
      }
    }
    ++slot;
  }
  if (blocks > 0) launch(blocks);
}

// Adam's step counts += 1 unless found_inf is set, before the update reads them.
constexpr int kMaxSteps = 448;
struct StepList {
  float* steps[kMaxSteps];
};

__global__ void increment_steps_kernel(StepList list, int n, const float* found_inf) {
  if (threadIdx.x < n && !(found_inf && *found_inf != 0)) *list.steps[threadIdx.x] += 1;
}

void increment_steps(ArrayRef<Tensor> steps, const float* found_inf, cudaStream_t stream) {
  StepList list;
  for (size_t b = 0; b < steps.size(); b += kMaxSteps) {
    int n = static_cast<int>(std::min<size_t>(kMaxSteps, steps.size() - b));
    for (int i = 0; i < n; ++i) list.steps[i] = steps[b + i].data_ptr<float>();
    increment_steps_kernel<<<1, kMaxSteps, 0, stream>>>(list, n, found_inf);
    EMBER_CUDA_LAUNCH_CHECK();
  }
}

const float* optional_ptr(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

void fused_adam_cuda(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> exp_avgs,
                     ArrayRef<Tensor> exp_avg_sqs, ArrayRef<Tensor> max_exp_avg_sqs,
                     ArrayRef<Tensor> state_steps, const FusedAdamArgs& args, const Tensor& grad_scale,
                     const Tensor& found_inf) {
  cudaStream_t stream = current_stream(params[0].device().index);
  increment_steps(state_steps, optional_ptr(found_inf), stream);
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    AdamOp<S> op{args, optional_ptr(grad_scale), optional_ptr(found_inf)};
    multi_tensor_apply<S>({params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs}, state_steps, op, stream);
  });
}

void fused_sgd_cuda(ArrayRef<Tensor> params, ArrayRef<Tensor> grads, ArrayRef<Tensor> momentum_buffers,
                    const FusedSgdArgs& args, const Tensor& grad_scale, const Tensor& found_inf) {
  cudaStream_t stream = current_stream(params[0].device().index);
  ops::visit_optim_dtype(params[0].dtype(), [&](auto tag) {
    using S = decltype(tag);
    SgdOp<S> op{args, optional_ptr(grad_scale), optional_ptr(found_inf)};
    multi_tensor_apply<S>({params, grads, momentum_buffers}, {}, op, stream);
  });
}

KernelRegistrar<FusedAdamFn> adam_reg(fused_adam_stub, kCUDA, &fused_adam_cuda);
KernelRegistrar<FusedSgdFn> sgd_reg(fused_sgd_stub, kCUDA, &fused_sgd_cuda);

}  // namespace
}  // namespace ember::cuda
