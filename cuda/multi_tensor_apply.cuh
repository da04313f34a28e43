#pragma once

// The multi_tensor_apply machinery (as PyTorch's aten/src/ATen/native/cuda/MultiTensorApply.cuh):
// the tensors' addresses and sizes travel in the kernel arguments, in batches of at most
// TensorListMeta::kMaxTensors tensors and kMaxBlocks chunks of kChunkSize elements. Each block
// runs one chunk, with 16-byte loads and stores where all of the chunk's lists are aligned.
// Unlike PyTorch's, the arguments use CUDA 12.1's 32 KB limit (Volta and later): BERT-base's
// AdamW step (~1,900 chunks) is one launch that fills the GPU, not six of 320 chunks, each
// leaving 40% of the H200's block slots empty.
//
// An Op has kDepth (its number of lists), a PerTensor value made once per block by
// per_tensor(step) (step: the tensor's step count, or null), operator()(PerTensor, S (&e)[kDepth])
// updating one element of every list, skip() (the whole launch does nothing when true),
// stores(d) (whether list d is written back) and, optionally, loads(d) (whether list d is read;
// every list is when absent). The fused optimizer steps, the GradScaler's unscale and
// _foreach_copy_ run through it. With a copy type C (not void), list 0's updated values are also
// stored, converted to C, into the tensors of `copies` (autocast's kept casts of the params).
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ember/core/array_ref.h"
#include "ember/core/tensor.h"
#include "ember/cuda/launch.cuh"

namespace ember::cuda::mta {

constexpr int kBlockSize = 512;
constexpr int64_t kChunkSize = 65536;
constexpr int kMaxBlocks = 2048;

template <int D>
struct TensorListMeta {
  static constexpr int kMaxTensors = 256;
  void* addresses[D][kMaxTensors];  // null for an absent list (max_exp_avg_sqs without amsgrad)
  int64_t numel[kMaxTensors];
  const float* steps[kMaxTensors];  // Adam's step counts
  void* copies[kMaxTensors];        // null where a tensor has no copy
  uint16_t block_to_tensor[kMaxBlocks];
  int block_to_chunk[kMaxBlocks];
};
// The op's own arguments take the rest of the 32,764 bytes.
static_assert(sizeof(TensorListMeta<5>) + 512 <= 32764);

template <class S, int N>
struct alignas(sizeof(S) * N) Pack {
  S v[N];
};

template <class Op>
__device__ __forceinline__ bool loads(const Op& op, int d) {
  if constexpr (requires { op.loads(d); })
    return op.loads(d);
  else
    return true;
}

// Updates elements [i, i + N) of one chunk: N per thread, loaded and stored as one Pack per list
// (and list 0's copy, when C is not void and copy is not null).
template <int N, class S, class C, int D, class Op>
__device__ __forceinline__ void update_pack(S* const (&ptr)[D], C* copy, int64_t i, const Op& op,
                                            const typename Op::PerTensor& c) {
  Pack<S, N> r[D] = {};
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (ptr[d] && loads(op, d)) r[d] = *reinterpret_cast<const Pack<S, N>*>(ptr[d] + i);
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
    if (ptr[d] && op.stores(d)) *reinterpret_cast<Pack<S, N>*>(ptr[d] + i) = r[d];
  if constexpr (!std::is_void_v<C>) {
    if (!copy) return;
    Pack<C, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = static_cast<C>(r[0].v[j]);
    *reinterpret_cast<Pack<C, N>*>(copy + i) = out;
  }
}

template <class S, class C, class Op>
__global__ void __launch_bounds__(kBlockSize) multi_tensor_kernel(TensorListMeta<Op::kDepth> meta, Op op) {
  constexpr int D = Op::kDepth;
  if (op.skip()) return;
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
  constexpr int kVec = 16 / sizeof(S);
  C* copy = nullptr;
  if constexpr (!std::is_void_v<C>) {
    copy = meta.copies[t] ? static_cast<C*>(meta.copies[t]) + start : nullptr;
    aligned = aligned && reinterpret_cast<uintptr_t>(copy) % (sizeof(C) * kVec) == 0;
  }
  const typename Op::PerTensor c = op.per_tensor(meta.steps[t]);
  if (aligned && n % kVec == 0) {
    for (int64_t i = threadIdx.x * kVec; i < n; i += blockDim.x * kVec)
      update_pack<kVec>(ptr, copy, i, op, c);
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) update_pack<1>(ptr, copy, i, op, c);
  }
}

// Launches Op over the lists (lists[0]: the params; an empty list passes null addresses). copies:
// empty, or one per param (undefined where none) of dtype C.
template <class S, class Op, class C = void>
void multi_tensor_apply(const std::vector<ArrayRef<Tensor>>& lists, ArrayRef<Tensor> steps, const Op& op,
                        cudaStream_t stream, ArrayRef<Tensor> copies = {}) {
  constexpr int D = Op::kDepth;
  using Meta = TensorListMeta<D>;
  Meta meta{};
  ArrayRef<Tensor> params = lists[0];
  auto set_slot = [&](int slot, size_t t) {
    for (int d = 0; d < D; ++d) meta.addresses[d][slot] = lists[d].empty() ? nullptr : lists[d][t].data_ptr();
    meta.numel[slot] = params[t].numel();
    meta.steps[slot] = steps.empty() ? nullptr : steps[t].data_ptr<float>();
    meta.copies[slot] = copies.empty() || !copies[t].defined() ? nullptr : copies[t].data_ptr();
  };
  auto launch = [&](int blocks) {
    multi_tensor_kernel<S, C, Op><<<blocks, kBlockSize, 0, stream>>>(meta, op);
    EMBER_CUDA_LAUNCH_CHECK();
  };
  int slot = 0, blocks = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    const int64_t chunks = ceil_div(params[t].numel(), kChunkSize);
    if (chunks == 0) continue;
    set_slot(slot, t);
    for (int64_t c = 0; c < chunks; ++c) {
      meta.block_to_tensor[blocks] = static_cast<uint16_t>(slot);
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

}  // namespace ember::cuda::mta
